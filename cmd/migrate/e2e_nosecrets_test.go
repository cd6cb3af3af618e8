package main_test

// End-to-end greps of every output for passwords (SPEC §3): a run's
// outputs of every kind, and the errors of wrong passwords at each end.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// secretPassword is a password full of characters that need escaping
// somewhere: URL-reserved ones, '%' before hex digits (decoding twice would
// change it), a space, and characters JSON escapes (&, <, >) and Go quotes (").
func secretPassword(prefix, unique string) string {
	return prefix + ":" + unique + `/s@cr3t?x%41%2F&+ =;!$,<>"`
}

// secretRole creates a PostgreSQL login role with a secretPassword, dropped
// after the test's databases (its cleanup is registered first).
func secretRole(t *testing.T) (role, pass string) {
	t.Helper()
	admin := testsvc.OpenPostgres(t, testsvc.PostgresURL(t))
	role = testsvc.Prefix(t)
	pass = secretPassword("Pw", role[len(role)-12:])
	exec1(t, admin, `CREATE ROLE `+ident(role)+` LOGIN PASSWORD '`+pass+`'`)
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), `DROP ROLE IF EXISTS `+ident(role)) })
	return role, pass
}

// secretMySQLUser creates a MariaDB/MySQL user with a secretPassword and
// every right on the database of dbURL (a testsvc.NewMySQLDB URL).
func secretMySQLUser(t *testing.T, dbURL string) (user, pass string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	admin := testsvc.OpenMySQL(t, testsvc.MySQLURL(t))
	p := testsvc.Prefix(t)
	user, pass = "m"+p[len(p)-12:], secretPassword("My", p[len(p)-12:])
	account := "'" + user + "'@'127.0.0.1'"
	exec1(t, admin, `CREATE USER `+account+` IDENTIFIED BY '`+pass+`'`)
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), `DROP USER IF EXISTS `+account) })
	exec1(t, admin, "GRANT ALL ON `"+strings.TrimPrefix(u.Path, "/")+"`.* TO "+account)
	return user, pass
}

// withUser is dsn (a URL) with its userinfo replaced.
func withUser(t *testing.T, dsn, user, pass string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, pass)
	return u.String()
}

// secretForms are the ways a password can show in output: as given,
// percent-encoded for a query, a path or a URL's userinfo, and each of those
// as Go and encoding/json quote it, and HTML-escaped.
func secretForms(passwords ...string) []string {
	var forms []string
	for _, pw := range passwords {
		userinfo := strings.TrimPrefix(url.UserPassword("", pw).String(), ":")
		for _, f := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw), userinfo} {
			goq := strconv.Quote(f)
			jsq, _ := json.Marshal(f)
			for _, g := range []string{f, goq[1 : len(goq)-1], string(jsq[1 : len(jsq)-1]), html.EscapeString(f)} {
				if !slices.Contains(forms, g) {
					forms = append(forms, g)
				}
			}
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return forms
}

// assertNoSecret fails when text holds any of forms; the text is shown with
// them replaced by <SECRET>.
func assertNoSecret(t *testing.T, what, text string, forms []string) {
	t.Helper()
	var hits []string
	shown := text
	for i, f := range forms {
		if strings.Contains(shown, f) {
			hits = append(hits, fmt.Sprintf("form #%d (%d bytes)", i, len(f)))
			shown = strings.ReplaceAll(shown, f, "<SECRET>")
		}
	}
	if len(hits) > 0 {
		t.Errorf("%s holds a secret (%s):\n%s", what, strings.Join(hits, ", "), shown)
	}
}

// TestRun_NoSecretsInOutput greps every output of migrate for the passwords
// of its source, target and Redis (SPEC §3): stdout and stderr of every
// command, the Markdown reports, a /metrics scrape taken mid-run, a drill's
// report and its children's command lines, and the command line of
// `run -p PLAN`. The passwords are full of characters that need escaping, on
// a PostgreSQL role, a MariaDB user and a Redis with requirepass.
func TestRun_NoSecretsInOutput(t *testing.T) {
	t.Parallel()
	role, pass := secretRole(t)
	// PostgreSQL to PostgreSQL: its role and grants are PostgreSQL's; a
	// MariaDB target (URL and native DSN) is among its cases.
	e := newEnv(t, pgEngine, pgEngine)
	seedItems(t, e.srcDB, "items", 300)
	seedBig(t, e, "big", drillRows)
	exec1(t, e.srcDB, `GRANT SELECT ON items, big TO `+ident(role))
	exec1(t, e.dstDB, `GRANT USAGE, CREATE ON SCHEMA public TO `+ident(role))
	srcURL, dstURL, sharedRedis := e.srcURL, e.dstURL, e.redisURL
	e.srcURL, e.dstURL = withUser(t, srcURL, role, pass), withUser(t, dstURL, role, pass)
	redisPass := secretPassword("Rp", role[len(role)-12:])
	e.redisURL = testsvc.StartRedisWithPassword(t, redisPass)
	items := planTable{name: "items", key: []string{"id"}}
	good := e.plan(t, items)

	// MariaDB at the target, as a URL and in the driver's native form.
	myDB := testsvc.NewMySQLDB(t)
	myUser, myPass := secretMySQLUser(t, myDB)
	myURL := withUser(t, myDB, myUser, myPass)
	my, err := url.Parse(myDB)
	if err != nil {
		t.Fatal(err)
	}
	nativeDSN := myUser + ":" + myPass + "@tcp(" + my.Host + ")" + my.Path
	name := e.name
	e.name, e.dstURL = name+"-my", myURL
	myPlan := e.plan(t, items)
	e.name, e.dstURL = name, withUser(t, dstURL, role, pass)

	// A copy of many batches, for the metrics scrape, the command line and
	// the drill.
	e.name, e.batchSize, e.leaseTTL = name+"-big", 500, "2s"
	bigPlan := e.plan(t, planTable{name: "big", key: []string{"id"}})
	e.name, e.batchSize, e.leaseTTL = name, 1000, "30s"

	// Failures: Redis unreachable, wrong passwords, an invalid plan.
	unreachPass := "rp-" + pass
	redisURL := e.redisURL
	e.redisURL = (&url.URL{Scheme: "redis", User: url.UserPassword("", unreachPass), Host: "127.0.0.1:1", Path: "/0"}).String()
	badRedis := e.plan(t, items)
	wrongRedisPass := "wrong-" + redisPass
	e.redisURL = withUser(t, redisURL, "", wrongRedisPass)
	wrongRedis := e.plan(t, items)
	e.redisURL = redisURL
	wrongPass := "wrong-" + pass
	e.srcURL = withUser(t, srcURL, role, wrongPass)
	badSource := e.plan(t, items)
	e.srcURL = withUser(t, srcURL, role, pass)
	e.batchSize = -5
	invalid := e.plan(t, items)
	e.batchSize = 1000
	wrongMyPass := "my-" + pass
	wrongMyURL := withUser(t, myDB, myUser, wrongMyPass)
	wrongNative := myUser + ":Nat1ve" + role[len(role)-12:] + "@tcp(" + my.Host + ")" + my.Path

	passwords := []string{pass, redisPass, myPass, unreachPass, wrongRedisPass, wrongPass, wrongMyPass, "Nat1ve" + role[len(role)-12:]}
	for _, shared := range []string{testsvc.PostgresURL(t), testsvc.MySQLURL(t), sharedRedis} {
		if u, err := url.Parse(shared); err == nil {
			if pw, ok := u.User.Password(); ok {
				passwords = append(passwords, pw)
			}
		}
	}
	secrets := secretForms(passwords...)

	dir := t.TempDir()
	report := func(name string) string { return filepath.Join(dir, name) }
	argvWarning := "on the command line can be read by every user"
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		files []string // reports the command writes
		warn  bool     // a DSN with a password on the command line
	}{
		{"validate", []string{"validate", "-p", good}, 0, nil, false},
		{"dry-run", []string{"run", "-p", good, "--dry-run", "-v"}, 0, nil, false},
		{"dry-run json report", []string{"run", "-p", good, "--dry-run", "--json", "--report", report("dry.md")}, 0, []string{report("dry.md")}, false},
		{"run", []string{"run", "-p", good, "-v"}, 0, nil, false},
		{"run again json", []string{"run", "-p", good, "--json", "-v"}, 0, nil, false},
		{"status", []string{"status", "-p", good, "-v"}, 0, nil, false},
		{"status json", []string{"status", "-p", good, "--json"}, 0, nil, false},
		{"verify report", []string{"verify", "-p", good, "-v", "--report", report("verify.md")}, 0, []string{report("verify.md")}, false},
		{"verify json", []string{"verify", "-p", good, "--json"}, 0, nil, false},
		{"dry-run after", []string{"run", "-p", good, "--dry-run", "--report", report("dry2.md")}, 0, []string{report("dry2.md")}, false},
		{"resume", []string{"resume", "-p", good, "-v"}, 0, nil, false},
		{"repair", []string{"repair", "-p", good, "-v", "--json"}, 0, nil, false},
		{"flags form", []string{"run", "--source", e.srcURL, "--target", e.dstURL, "--redis", redisURL,
			"--table", "items", "--target-table", "items_flags", "--key", "id", "--name", name + "-flags", "-v", "--json"}, 0, nil, true},
		{"run mysql", []string{"run", "-p", myPlan, "-v", "--json"}, 0, nil, false},
		{"status mysql", []string{"status", "-p", myPlan, "-v"}, 0, nil, false},
		{"verify mysql", []string{"verify", "-p", myPlan, "-v", "--json", "--report", report("verify-my.md")}, 0, []string{report("verify-my.md")}, false},
		{"run mysql native", []string{"run", "--source", e.srcURL, "--target", nativeDSN, "--redis", redisURL,
			"--table", "items", "--target-table", "items_native", "--key", "id", "--name", name + "-native", "-v", "--json"}, 0, nil, true},
		{"validate mysql", []string{"validate", "--source", myURL, "--target", nativeDSN, "--redis", redisURL, "--table", "items", "--key", "id"}, 0, nil, true},
		{"run unreachable redis", []string{"run", "-p", badRedis, "-v"}, 1, nil, false},
		{"status unreachable redis", []string{"status", "-p", badRedis}, 1, nil, false},
		{"validate unreachable redis", []string{"validate", "-p", badRedis}, 0, nil, false},
		{"run wrong redis password", []string{"run", "-p", wrongRedis, "-v", "--json"}, 1, nil, false},
		{"status wrong redis password", []string{"status", "-p", wrongRedis, "--json"}, 1, nil, false},
		{"run wrong source password", []string{"run", "-p", badSource, "-v", "--json"}, 1, nil, false},
		{"verify wrong source password", []string{"verify", "-p", badSource, "--report", report("verify-bad.md")}, 1, nil, false},
		{"run mysql url wrong password", []string{"run", "--source", wrongMyURL, "--target", e.dstURL, "--redis", redisURL,
			"--table", "items", "--key", "id", "-v", "--json"}, 1, nil, true},
		{"run mysql native wrong password", []string{"run", "--source", e.srcURL, "--target", wrongNative, "--redis", redisURL,
			"--table", "items", "--key", "id", "-v"}, 1, nil, true},
		{"validate invalid plan", []string{"validate", "-p", invalid}, 2, nil, false},
		{"run invalid plan", []string{"run", "-p", invalid}, 2, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runMigrate(t, tc.args...)
			wantCode(t, r, tc.code)
			assertNoSecret(t, "stdout", r.stdout, secrets)
			assertNoSecret(t, "stderr", r.stderr, secrets)
			for _, f := range tc.files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Errorf("report: %v", err)
				}
				assertNoSecret(t, "report "+filepath.Base(f), string(b), secrets)
			}
			if tc.code == 0 && !strings.Contains(r.stdout+r.stderr, "xxxxx") && strings.HasPrefix(tc.name, "validate") {
				t.Errorf("validate does not show the redacted DSNs:\n%s", r)
			}
			if got := strings.Count(r.stderr, argvWarning); got != map[bool]int{false: 0, true: 1}[tc.warn] {
				t.Errorf("%d warnings about passwords on the command line, want %v:\n%s", got, tc.warn, r.stderr)
			}
		})
	}

	t.Run("metrics and cmdline mid-run", func(t *testing.T) {
		// The holder's first batch waits at a gate with the lease held:
		// the scrape sees it running, whatever the speed. (A source table
		// locked against reads would stop it earlier, at setup, which
		// reads the table's definition.)
		g := e.gateBig(t, "NEW.id > 0")
		exec1(t, e.dstDB, "ALTER TABLE big OWNER TO "+ident(role)) // the run's role adds the fence column; the drill's --reset drops it
		addr := freeAddr(t)
		p := startMigrate(t, "run", "-p", bigPlan, "-v", "--json", "--instance", "scraped", "--metrics-addr", addr)
		// Start returns once the binary is exec'd: its argv is in place. The
		// environment holds nothing of ours (childEnv drops MIGRATE_*); only
		// the command line is checked.
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); !slices.Contains(args, bigPlan) {
			t.Errorf("/proc/PID/cmdline %q is not the run's", args)
		}
		assertNoSecret(t, "/proc/PID/cmdline of run -p PLAN", string(cmdline), secrets)
		var scraped string
		poll(t, 60*time.Second, "a scrape of the holder while it copies", func() bool {
			select {
			case <-p.done:
				t.Fatalf("the run ended before a scrape showed it copying:\n%s", p.wait(t))
			default:
			}
			m, err := get(addr)
			if err == nil {
				assertNoSecret(t, "/metrics", m, secrets)
				scraped = m
			}
			return err == nil && strings.Contains(m, `state="running",table="big"} 1`)
		})
		g.openAll(t)
		r := p.wait(t)
		wantCode(t, r, 0)
		assertNoSecret(t, "stdout", r.stdout, secrets)
		assertNoSecret(t, "stderr", r.stderr, secrets)
		if !strings.Contains(scraped, `migrate_fence_token{plan="`+name+`-big"`) {
			t.Errorf("the scrape lacks the holder's migrate_fence_token:\n%s", scraped)
		}
	})

	t.Run("drill", func(t *testing.T) {
		// The plan has run: the drill starts over (--reset). Its children get
		// the DSNs in their environment; their command lines are checked too.
		p := startMigrate(t, "drill", "-p", bigPlan, "kill", "--json", "--reset", "--holder-latency", "20ms", "-v")
		seen := map[int]bool{}
		for done := false; !done; {
			select {
			case <-p.done:
				done = true
			case <-time.After(20 * time.Millisecond):
			}
			for pid, cmdline := range childCmdlines(p.cmd.Process.Pid) {
				if !seen[pid] {
					seen[pid] = true
					assertNoSecret(t, fmt.Sprintf("/proc/%d/cmdline of a drill child", pid), cmdline, secrets)
				}
			}
		}
		r := p.wait(t)
		assertNoSecret(t, "stdout", r.stdout, secrets)
		assertNoSecret(t, "stderr", r.stderr, secrets)
		var res struct {
			Pass   bool  `json:"pass"`
			Drills []any `json:"drills"`
		}
		decodeJSON(t, r, &res)
		t.Logf("drill: exit %d, pass %v, %d child processes seen", r.code, res.Pass, len(seen))
		if len(res.Drills) == 0 || len(seen) < 2 {
			t.Errorf("the drill did not run (%d drills, %d children seen):\n%s", len(res.Drills), len(seen), r)
		}
	})
}

// childCmdlines returns the command lines of the running children of pid,
// by process id, NULs turned to spaces.
func childCmdlines(pid int) map[int]string {
	out := map[int]string{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if i < 0 || len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		dir := filepath.Dir(st)
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		child, _ := strconv.Atoi(filepath.Base(dir))
		if err == nil && len(cmdline) > 0 {
			out[child] = strings.ReplaceAll(string(cmdline), "\x00", " ")
		}
	}
	return out
}

// TestWrongPassword: a wrong password for the source, the target
// (PostgreSQL or MariaDB) or Redis fails the run with exit 1 and an error
// that names the end and its redacted DSN, shows no password, and writes
// nothing to the target or Redis.
func TestWrongPassword(t *testing.T) {
	t.Parallel()
	role, pass := secretRole(t)
	srcURL := testsvc.NewPostgresDB(t)
	src := testsvc.OpenPostgres(t, srcURL)
	seedItems(t, src, "items", 300)
	exec1(t, src, `GRANT SELECT ON items TO `+ident(role))
	wrong := "wrong-" + pass
	redisPass := secretPassword("Rp", role[len(role)-12:])
	secrets := secretForms(pass, wrong, redisPass, "wrong-"+redisPass)

	for _, tc := range []struct{ name, end string }{
		{"source postgres", "source"}, {"target postgres", "target"}, {"target mysql", "target"}, {"redis", "lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			secrets := secrets
			redisURL := testsvc.StartRedisWithPassword(t, redisPass)
			e := bareEnv(t, pgEngine, pgEngine)
			e.srcURL, e.redisURL = withUser(t, srcURL, role, pass), redisURL
			var dst *sql.DB
			var tables string // the target's tables
			if tc.name == "target mysql" {
				db := testsvc.NewMySQLDB(t)
				user, myPass := secretMySQLUser(t, db)
				secrets = append(slices.Clone(secrets), secretForms(myPass, "wrong-"+myPass)...)
				e.dst, e.dstURL, dst = mysqlEngine, withUser(t, db, user, "wrong-"+myPass), testsvc.OpenMySQL(t, db)
				tables = `SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()`
			} else {
				db := testsvc.NewPostgresDB(t)
				dst = testsvc.OpenPostgres(t, db)
				exec1(t, dst, `GRANT USAGE, CREATE ON SCHEMA public TO `+ident(role))
				e.dstURL = withUser(t, db, role, pass)
				tables = `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`
			}
			var dsn string
			switch tc.name {
			case "source postgres":
				e.srcURL = withUser(t, srcURL, role, wrong)
				dsn = e.srcURL
			case "target postgres":
				e.dstURL = withUser(t, e.dstURL, role, wrong)
				dsn = e.dstURL
			case "target mysql":
				dsn = e.dstURL
			case "redis":
				e.redisURL = withUser(t, redisURL, "", "wrong-"+redisPass)
				dsn = e.redisURL
			}
			d, err := plans.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			plan := e.plan(t, planTable{name: "items", key: []string{"id"}})

			r := runMigrate(t, "run", "-p", plan, "-v")
			wantCode(t, r, 1)
			if want := "migrate run: " + tc.end + " " + d.Redacted() + ": "; !strings.Contains(r.stderr, want) {
				t.Errorf("the error does not name the %s and its DSN (want %q):\n%s", tc.end, want, r.stderr)
			}
			assertNoSecret(t, "stdout", r.stdout, secrets)
			assertNoSecret(t, "stderr", r.stderr, secrets)

			if n := queryInt(t, dst, tables); n != 0 {
				t.Errorf("the target holds %d tables after the failed run, want none", n)
			}
			u, err := url.Parse(redisURL)
			if err != nil {
				t.Fatal(err)
			}
			rc := redis.NewClient(&redis.Options{Addr: u.Host, Password: redisPass})
			defer rc.Close()
			if n, err := rc.DBSize(t.Context()).Result(); err != nil || n != 0 {
				t.Errorf("Redis holds %d keys (%v) after the failed run, want none", n, err)
			}
		})
	}
}
