package main_test

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
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

func TestRun_StaleHolderFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 300000
	e.batchSize = 500
	seedBig(t, e.src, "big", n)
	// The holder waits at the first row of the batch past n/2, its fence
	// check done: the raise comes while it copies, however fast it copies.
	g := gateBig(t, e, fmt.Sprintf("NEW.id > %d", n/2))
	plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}})

	p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "holder")
	g.waitHeld(t, p, 1)
	tok, _ := readFence(t, e.dst, e.name, "big", 0)

	// A newer holder raises the watermark. The UPDATE waits for the holder's
	// batch in flight (it holds the watermark row locked); the checkpoint read
	// in the same transaction then sees every batch committed before the raise.
	doneAtRaise := g.raise(t, e.name, "big")
	if doneAtRaise < n/2 || doneAtRaise >= n {
		t.Errorf("%d rows done at the raise, want the %d before the gate and at most the batches let through before it", doneAtRaise, n/2)
	}

	r := p.wait(t)
	wantCode(t, r, 4)
	var rep runReport
	decodeJSON(t, r, &rep)
	if rep.StaleRejections < 1 {
		t.Errorf("stale_rejections %d, want at least 1", rep.StaleRejections)
	}
	t.Logf("fenced after %v: %d rows done at the raise, stale_rejections %d", r.elapsed.Round(time.Millisecond), doneAtRaise, rep.StaleRejections)

	// Nothing was committed after the raise.
	cp := readCheckpoint(t, e.dst, e.name, "big", 0)
	if cp.rowsDone != doneAtRaise || cp.state == "done" || cp.token != tok {
		t.Errorf("checkpoint %+v after the refusal, want %d rows by token %d, not done", cp, doneAtRaise, tok)
	}
	if got := queryInt(t, e.dst, `SELECT count(*) FROM big`); got != doneAtRaise {
		t.Errorf("target holds %d rows, want the %d committed before the raise", got, doneAtRaise)
	}
	if got := queryInt(t, e.dst, `SELECT count(*) FROM big WHERE _fence <> $1`, tok); got != 0 {
		t.Errorf("%d target rows carry a token other than the holder's %d", got, tok)
	}
	if w, owner := readFence(t, e.dst, e.name, "big", 0); w != tok+1000 || owner != "intruder" {
		t.Errorf("watermark %d of %q, want %d of intruder (the refused holder must not touch it)", w, owner, tok+1000)
	}
}

// statusOf runs `status --json` and decodes it, checking the keys of SPEC §4.
func statusOf(t *testing.T, plan string) (tables, leases []map[string]any) {
	t.Helper()
	r := runMigrate(t, "status", "-p", plan, "--json")
	wantCode(t, r, 0)
	var raw map[string]any
	decodeJSON(t, r, &raw)
	requireKeys(t, "status --json", raw, "plan", "tables", "leases")
	for i, tb := range requireList(t, "status --json", raw, "tables") {
		tables = append(tables, requireKeys(t, fmt.Sprintf("tables[%d]", i), tb, "table", "shard", "state", "rows_done", "last_key", "token", "updated_at"))
	}
	for i, l := range requireList(t, "status --json", raw, "leases") {
		leases = append(leases, requireKeys(t, fmt.Sprintf("leases[%d]", i), l, "table", "shard", "owner", "token", "ttl_ms"))
	}
	return tables, leases
}

func TestStatus_JSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 100000
	e.batchSize, e.leaseTTL = 500, "5s"
	seedBig(t, e.src, "big", n)
	plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}})

	if tables, leases := statusOf(t, plan); len(tables) != 0 || len(leases) != 0 {
		t.Errorf("before any run: tables %v leases %v, want none", tables, leases)
	}

	// The source table locked, the holder waits for its first read with the
	// lease held: status sees it running, however fast the copy would be.
	lock, err := e.src.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback() }()
	if _, err := lock.ExecContext(t.Context(), `LOCK TABLE big IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	p := startMigrate(t, "run", "-p", plan, "--instance", "probe")
	var tables, leases []map[string]any
	poll(t, 60*time.Second, "a lease in status --json", func() bool {
		select {
		case <-p.done:
			t.Fatalf("the run ended before status saw its lease:\n%s", p.wait(t))
		default:
		}
		tables, leases = statusOf(t, plan)
		return len(leases) > 0
	})
	l := leases[0]
	if owner, _ := l["owner"].(string); !strings.HasPrefix(owner, "probe-") || len(owner) < len("probe-")+32 {
		t.Errorf("lease owner %q, want probe-<128 random bits>", owner)
	}
	if ttl, _ := l["ttl_ms"].(float64); ttl <= 0 || ttl > 5000 {
		t.Errorf("lease ttl_ms %v, want in (0, 5000]", l["ttl_ms"])
	}
	if tok, _ := l["token"].(float64); tok < 1 || l["table"] != "big" || l["shard"] != float64(0) {
		t.Errorf("lease %v, want big#0 with a token", l)
	}
	if len(tables) != 1 || (tables[0]["state"] != "running" && tables[0]["state"] != "pending") {
		t.Errorf("tables while running: %v", tables)
	}

	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, p.wait(t), 0)
	tables, leases = statusOf(t, plan)
	if len(leases) != 0 {
		t.Errorf("leases after the run: %v, want none (released)", leases)
	}
	if len(tables) != 1 {
		t.Fatalf("tables after the run: %v", tables)
	}
	s := tables[0]
	if s["table"] != "big" || s["shard"] != float64(0) || s["state"] != "done" || s["rows_done"] != float64(n) || fmt.Sprint(s["last_key"]) != fmt.Sprint(n) {
		t.Errorf("shard status %v, want big#0 done, %d rows, last_key %d", s, n, n)
	}
	if tok, _ := s["token"].(float64); tok < 1 {
		t.Errorf("shard token %v", s["token"])
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(s["updated_at"])); err != nil {
		t.Errorf("updated_at: %v", err)
	}
	r := runMigrate(t, "status", "-p", plan)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "done") || !strings.Contains(r.stdout, "leases: none held") {
		t.Errorf("status text:\n%s", r)
	}
}

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
	e := newEnv(t)
	seedItems(t, e.src, "items", 300)
	seedBig(t, e.src, "big", drillRows)
	exec1(t, e.src, `GRANT SELECT ON items, big TO `+ident(role))
	exec1(t, e.dst, `GRANT USAGE, CREATE ON SCHEMA public TO `+ident(role))
	srcURL, dstURL, sharedRedis := e.srcURL, e.dstURL, e.redisURL
	e.srcURL, e.dstURL = withUser(t, srcURL, role, pass), withUser(t, dstURL, role, pass)
	redisPass := secretPassword("Rp", role[len(role)-12:])
	e.redisURL = testsvc.StartRedisWithPassword(t, redisPass)
	items := tableSpec{name: "items", key: []string{"id"}}
	good := e.writePlan(t, items)

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
	myPlan := e.writePlan(t, items)
	e.name, e.dstURL = name, withUser(t, dstURL, role, pass)

	// A copy of many batches, for the metrics scrape, the command line and
	// the drill.
	e.name, e.batchSize, e.leaseTTL = name+"-big", 500, "2s"
	bigPlan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}})
	e.name, e.batchSize, e.leaseTTL = name, 1000, "30s"

	// Failures: Redis unreachable, wrong passwords, an invalid plan.
	unreachPass := "rp-" + pass
	redisURL := e.redisURL
	e.redisURL = (&url.URL{Scheme: "redis", User: url.UserPassword("", unreachPass), Host: "127.0.0.1:1", Path: "/0"}).String()
	badRedis := e.writePlan(t, items)
	wrongRedisPass := "wrong-" + redisPass
	e.redisURL = withUser(t, redisURL, "", wrongRedisPass)
	wrongRedis := e.writePlan(t, items)
	e.redisURL = redisURL
	wrongPass := "wrong-" + pass
	e.srcURL = withUser(t, srcURL, role, wrongPass)
	badSource := e.writePlan(t, items)
	e.srcURL = withUser(t, srcURL, role, pass)
	e.batchSize = -5
	invalid := e.writePlan(t, items)
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
		// The source table locked, the holder waits for its first read with
		// the lease held: the scrape sees it running, whatever the speed.
		lock, err := e.src.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = lock.Rollback() }()
		if _, err := lock.ExecContext(t.Context(), `LOCK TABLE big IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
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
		if err := lock.Rollback(); err != nil {
			t.Fatal(err)
		}
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
		{"source postgres", "source"}, {"target postgres", "target"}, {"target mysql", "target"}, {"redis", "redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			secrets := secrets
			redisURL := testsvc.StartRedisWithPassword(t, redisPass)
			e := &env{name: testsvc.Prefix(t), srcURL: withUser(t, srcURL, role, pass), redisURL: redisURL,
				leaseTTL: "30s", batchSize: 1000, planDir: t.TempDir()}
			var dst *sql.DB
			var tables string // the target's tables
			if tc.name == "target mysql" {
				db := testsvc.NewMySQLDB(t)
				user, myPass := secretMySQLUser(t, db)
				secrets = append(slices.Clone(secrets), secretForms(myPass, "wrong-"+myPass)...)
				e.dstURL, dst = withUser(t, db, user, "wrong-"+myPass), testsvc.OpenMySQL(t, db)
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
			plan := e.writePlan(t, tableSpec{name: "items", key: []string{"id"}})

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

// TestRun_FlushallRedis_L4: Redis restarts without persistence mid-run, so
// its fencing counter starts again from zero; the target's watermark, not
// Redis, decides, and the next run's token must end up above it (SPEC §5 L4).
func TestRun_FlushallRedis_L4(t *testing.T) {
	t.Parallel()
	rs := testsvc.StartRedis(t, false)
	e := newEnv(t)
	const n = 100000
	e.redisURL, e.leaseTTL = rs.URL, "2s"
	seedBig(t, e.src, "big", n)
	// The holder waits at the first row of the batch past n/2 when it is
	// killed: mid-run, however fast it copies.
	g := gateBig(t, e, fmt.Sprintf("NEW.id > %d", n/2))
	plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}})

	p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "before")
	g.waitHeld(t, p, 1)
	p.kill(t)
	g.drop(t) // its batch at the gate ends with its connection, as a killed client's does
	g.openAll(t)
	w, _ := readFence(t, e.dst, e.name, "big", 0)
	before := readCheckpoint(t, e.dst, e.name, "big", 0)
	rs.Restart() // no AOF, no RDB: the lease and the counter are gone

	r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "after")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	tok, owner := readFence(t, e.dst, e.name, "big", 0)
	t.Logf("watermark before the Redis restart %d, after the run %d (owner %s); %d rows were done before", w, tok, owner, before.rowsDone)
	if tok <= w || !strings.HasPrefix(owner, "after-") {
		t.Errorf("watermark token %d of %q, want above %d, by the second run", tok, owner, w)
	}
	if len(rep.Shards) != 1 || rep.Shards[0].State != "done" || rep.Shards[0].Token != tok {
		t.Errorf("shards %+v, want big#0 done with token %d", rep.Shards, tok)
	}
	if rep.RowsWritten != n-before.rowsDone || rep.StaleRejections != 0 {
		t.Errorf("rows_written %d stale_rejections %d, want %d and 0", rep.RowsWritten, rep.StaleRejections, n-before.rowsDone)
	}
	// Redis forgot the lease, the target did not: still a takeover, from the
	// holder the fence row names.
	if len(rep.Takeovers) != 1 || !strings.HasPrefix(rep.Takeovers[0].PreviousOwner, "before-") ||
		rep.Takeovers[0].PreviousToken != w || rep.Takeovers[0].ReplayedRows != 0 {
		t.Errorf("takeovers %+v, want one from the killed holder with token %d", rep.Takeovers, w)
	}
	if cp := readCheckpoint(t, e.dst, e.name, "big", 0); cp.state != "done" || cp.rowsDone != n || cp.token != tok {
		t.Errorf("checkpoint %+v, want done, %d rows, token %d", cp, n, tok)
	}
	if got := queryInt(t, e.dst, `SELECT count(*) FROM big WHERE id > $1 AND _fence <> $2`, before.rowsDone, tok); got != 0 {
		t.Errorf("%d rows copied after the restart carry another token than %d", got, tok)
	}
	assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
}

// TestRun_TwoInstances runs the same plan twice at once: each shard is copied
// by exactly one of them, and both exit 0 once every shard is done (SPEC §4).
func TestRun_TwoInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 100000
	e.batchSize, e.leaseTTL = 500, "5s"
	seedBig(t, e.src, "big", n)
	plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}, shards: 4})

	a := startMigrate(t, "run", "-p", plan, "--json", "--instance", "a")
	b := startMigrate(t, "run", "-p", plan, "--json", "--instance", "b")
	var total int64
	for _, p := range []*proc{a, b} {
		r := p.wait(t)
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		if len(rep.Shards) != 4 || rep.StaleRejections != 0 || len(rep.Takeovers) != 0 {
			t.Errorf("%v: shards %+v stale %d takeovers %+v, want 4 shards, no rejections, no takeovers",
				p.cmd.Args[1:], rep.Shards, rep.StaleRejections, rep.Takeovers)
		}
		for _, s := range rep.Shards {
			if s.State != "done" {
				t.Errorf("%v: shard %d state %q", p.cmd.Args[1:], s.Shard, s.State)
			}
		}
		total += rep.RowsWritten
		t.Logf("instance %s wrote %d rows in %v", p.cmd.Args[len(p.cmd.Args)-1], rep.RowsWritten, r.elapsed.Round(time.Millisecond))
	}
	if total != n {
		t.Errorf("the instances wrote %d rows together, want %d", total, n)
	}
	assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	if writes := writesToTable(t, e.dst, "big", n); writes != n {
		t.Errorf("the target saw %d row writes, want %d: no row is written twice without a crash", writes, n)
	}
}

// TestRun_SIGTERMReleasesLease stops a holder with SIGTERM: it rolls back,
// releases its lease at once (L3) instead of leaving it to expire, and the
// next run resumes without waiting for the TTL and without a takeover.
func TestRun_SIGTERMReleasesLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 200000
	e.leaseTTL = "30s"
	seedBig(t, e.src, "big", n)
	// SIGTERM comes while the holder's batch waits at the gate past n/2:
	// mid-copy, however fast it copies.
	g := gateBig(t, e, fmt.Sprintf("NEW.id > %d", n/2))
	plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}})

	p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "term")
	g.waitHeld(t, p, 1)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	g.openAll(t)
	t.Logf("after SIGTERM: exit %d in %v", r.code, r.elapsed.Round(time.Millisecond))
	// Neither done nor fenced: nobody took the lease and no token was refused.
	if r.code != 1 {
		t.Errorf("want exit 1 (error) after SIGTERM mid-copy, got %d: exit 4 would tell scripts the lease was lost\n%s", r.code, r)
	}
	if _, leases := statusOf(t, plan); len(leases) != 0 {
		t.Errorf("leases after SIGTERM: %v, want none", leases)
	}
	before := readCheckpoint(t, e.dst, e.name, "big", 0)
	if before.rowsDone != n/2 {
		t.Errorf("checkpoint %+v after SIGTERM, want the %d rows before the gate: the batch in flight rolled back", before, n/2)
	}

	r = runMigrate(t, "run", "-p", plan, "--json", "--instance", "next")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	// A lease left to expire would have made the next run stand by for the
	// TTL, then take over from the previous owner.
	if len(rep.Takeovers) != 0 || rep.RowsWritten != n-before.rowsDone {
		t.Errorf("takeovers %+v rows_written %d, want none and %d", rep.Takeovers, rep.RowsWritten, n-before.rowsDone)
	}
	if strings.Contains(r.stderr, "standby: lease held by another instance") {
		t.Errorf("the next run stood by: it waited for the lease\n%s", r.stderr)
	}
	assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
}

// TestRun_RedisDownFencesHolder: Redis stops (no persistence) under a
// holder. The holder stops committing within the TTL (it cannot renew);
// when Redis is back it takes the shard again — the target's watermark
// shows no successor — with a token above its old one (L4), and finishes.
// When Redis stays away longer than max_outage, it exits 4.
func TestRun_RedisDownFencesHolder(t *testing.T) {
	for _, back := range []bool{true, false} {
		t.Run(map[bool]string{true: "back", false: "gone"}[back], func(t *testing.T) {
			t.Parallel()
			rs := testsvc.StartRedis(t, false)
			e := newEnv(t)
			const n, ttl = 500000, 2 * time.Second
			e.redisURL, e.leaseTTL, e.extra = rs.URL, ttl.String(), "max_outage: 4s\n"
			seedBig(t, e.src, "big", n)
			// Far ahead of where Redis stops, a gate keeps the copy from
			// ending before Redis is back, however fast it copies.
			g := gateBig(t, e, fmt.Sprintf("NEW.id > %d", n*3/4))
			plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}})

			p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "cut")
			waitProgress(t, p, e.dst, e.name, "big", n/10, n*3/4+1)
			before, _ := readFence(t, e.dst, e.name, "big", 0)
			stopped := time.Now()
			rs.Stop()
			time.Sleep(ttl + time.Second)
			var last time.Time
			if err := e.dst.QueryRowContext(t.Context(), `SELECT updated_at FROM _migrate_checkpoint WHERE plan = $1`, e.name).Scan(&last); err != nil {
				t.Fatal(err)
			}
			if last.After(stopped.Add(ttl)) {
				t.Errorf("a batch committed %v after Redis stopped, past the lease TTL %v", last.Sub(stopped), ttl)
			}
			if cp := readCheckpoint(t, e.dst, e.name, "big", 0); cp.state == "done" || cp.rowsDone >= n {
				t.Fatalf("checkpoint %+v: the copy finished without Redis", cp)
			}
			if !back {
				r := p.wait(t)
				wantCode(t, r, 4)
				t.Logf("Redis gone: exit 4 after %v", time.Since(stopped).Round(100*time.Millisecond))
				return
			}
			rs.Start()
			g.openAll(t)
			r := p.wait(t)
			wantCode(t, r, 0)
			after, owner := readFence(t, e.dst, e.name, "big", 0)
			t.Logf("Redis back after %v; the holder went on with token %d (was %d), done %v after the stop",
				ttl+time.Second, after, before, time.Since(stopped).Round(100*time.Millisecond))
			if after <= before || !strings.HasPrefix(owner, "cut-") || !strings.Contains(r.stderr, "taking the shard again") {
				t.Errorf("token %d of %s after, %d before: want the same holder with a higher token", after, owner, before)
			}
			assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
		})
	}
}
