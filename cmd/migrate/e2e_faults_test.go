package main_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

func TestRun_StaleHolderFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 300000
	e.batchSize = 500
	seedBig(t, e.src, "big", n)
	plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}})

	p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "holder")
	waitProgress(t, p, e.dst, e.name, "big", 5000, n)
	tok, _ := readFence(t, e.dst, e.name, "big", 0)

	// A newer holder raises the watermark. The UPDATE waits for the holder's
	// batch in flight (it holds the watermark row locked); the checkpoint read
	// in the same transaction then sees every batch committed before the raise.
	tx, err := e.dst.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(t.Context(), `UPDATE _migrate_fence SET token = token + 1000, owner = 'intruder'
WHERE plan = $1 AND tbl = 'big' AND shard = 0`, e.name); err != nil {
		t.Fatal(err)
	}
	var doneAtRaise int64
	if err := tx.QueryRowContext(t.Context(), `SELECT rows_done FROM _migrate_checkpoint WHERE plan = $1 AND tbl = 'big' AND shard = 0`,
		e.name).Scan(&doneAtRaise); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
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

func TestRun_NoSecretsInOutput(t *testing.T) {
	t.Parallel()
	// A role of our own, with a password full of URL-reserved characters. Its
	// cleanup is registered before the databases', so it runs after them.
	admin := testsvc.OpenPostgres(t, testsvc.PostgresURL(t))
	role := testsvc.Prefix(t)
	pass := "Pw:" + role[len(role)-12:] + "/s@cr3t?x%"
	exec1(t, admin, `CREATE ROLE `+ident(role)+` LOGIN PASSWORD '`+pass+`'`)
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), `DROP ROLE IF EXISTS `+ident(role)) })

	e := newEnv(t)
	seedItems(t, e.src, "items", 300)
	exec1(t, e.src, `GRANT SELECT ON items TO `+ident(role))
	exec1(t, e.dst, `GRANT USAGE, CREATE ON SCHEMA public TO `+ident(role))
	withUser := func(dsn, pw string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(role, pw)
		return u.String()
	}
	srcURL, dstURL, redisURL := e.srcURL, e.dstURL, e.redisURL
	e.srcURL, e.dstURL = withUser(srcURL, pass), withUser(dstURL, pass)
	items := tableSpec{name: "items", key: []string{"id"}}
	good := e.writePlan(t, items)

	redisPass := "rp-" + pass
	e.redisURL = (&url.URL{Scheme: "redis", User: url.UserPassword("", redisPass), Host: "127.0.0.1:1", Path: "/0"}).String()
	badRedis := e.writePlan(t, items)
	e.redisURL = redisURL
	wrongPass := "wrong-" + pass
	e.srcURL = withUser(srcURL, wrongPass)
	badSource := e.writePlan(t, items)
	e.srcURL = withUser(srcURL, pass)
	e.batchSize = -5
	invalid := e.writePlan(t, items)

	// MySQL at either end, as a URL and in the driver's native form.
	my, err := url.Parse(testsvc.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	myPass, nativePass := "my-"+pass, "Nat1ve"+role[len(role)-12:]
	myURL := (&url.URL{Scheme: "mysql", User: url.UserPassword("migrate", myPass), Host: my.Host, Path: my.Path}).String()
	nativeDSN := "migrate:" + nativePass + "@tcp(" + my.Host + ")" + my.Path

	secrets := []string{}
	for _, s := range []string{pass, redisPass, wrongPass, myPass, nativePass} {
		secrets = append(secrets, s, url.QueryEscape(s), url.PathEscape(s), strings.TrimPrefix(url.UserPassword("", s).String(), ":"))
	}
	for _, shared := range []string{testsvc.PostgresURL(t), testsvc.MySQLURL(t)} {
		if u, err := url.Parse(shared); err == nil {
			if pw, ok := u.User.Password(); ok {
				secrets = append(secrets, pw)
			}
		}
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"validate", []string{"validate", "-p", good}, 0},
		{"run", []string{"run", "-p", good, "-v"}, 0},
		{"run again json", []string{"run", "-p", good, "--json", "-v"}, 0},
		{"status", []string{"status", "-p", good, "-v"}, 0},
		{"status json", []string{"status", "-p", good, "--json"}, 0},
		{"flags form", []string{"run", "--source", e.srcURL, "--target", e.dstURL, "--redis", redisURL,
			"--table", "items", "--target-table", "items_flags", "--key", "id", "--name", e.name + "-flags", "-v", "--json"}, 0},
		{"run unreachable redis", []string{"run", "-p", badRedis, "-v"}, 1},
		{"status unreachable redis", []string{"status", "-p", badRedis}, 1},
		{"validate unreachable redis", []string{"validate", "-p", badRedis}, 0},
		{"run wrong source password", []string{"run", "-p", badSource, "-v", "--json"}, 1},
		{"run mysql url wrong password", []string{"run", "--source", myURL, "--target", e.dstURL, "--redis", redisURL,
			"--table", "items", "--key", "id", "-v", "--json"}, 1},
		{"run mysql native wrong password", []string{"run", "--source", e.srcURL, "--target", nativeDSN, "--redis", redisURL,
			"--table", "items", "--key", "id", "-v"}, 1},
		{"validate mysql", []string{"validate", "--source", myURL, "--target", nativeDSN, "--redis", redisURL, "--table", "items", "--key", "id"}, 0},
		{"validate invalid plan", []string{"validate", "-p", invalid}, 2},
		{"run invalid plan", []string{"run", "-p", invalid}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runMigrate(t, tc.args...)
			wantCode(t, r, tc.code)
			out := r.stdout + r.stderr
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("output holds the secret %q:\n%s", s, r)
				}
			}
			if tc.code == 0 && !strings.Contains(out, "xxxxx") && strings.HasPrefix(tc.name, "validate") {
				t.Errorf("validate does not show the redacted DSNs:\n%s", r)
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
	plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}})

	p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "before")
	waitProgress(t, p, e.dst, e.name, "big", n/5, n*9/10)
	p.kill(t)
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
	plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}})

	p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "term")
	waitProgress(t, p, e.dst, e.name, "big", n/5, n*9/10)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	t.Logf("after SIGTERM: exit %d in %v", r.code, r.elapsed.Round(time.Millisecond))
	// Neither done nor fenced: nobody took the lease and no token was refused.
	if r.code != 1 {
		t.Errorf("want exit 1 (error) after SIGTERM mid-copy, got %d: exit 4 would tell scripts the lease was lost\n%s", r.code, r)
	}
	if _, leases := statusOf(t, plan); len(leases) != 0 {
		t.Errorf("leases after SIGTERM: %v, want none", leases)
	}
	before := readCheckpoint(t, e.dst, e.name, "big", 0)

	r = runMigrate(t, "run", "-p", plan, "--json", "--instance", "next")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	if len(rep.Takeovers) != 0 || rep.RowsWritten != n-before.rowsDone {
		t.Errorf("takeovers %+v rows_written %d, want none and %d", rep.Takeovers, rep.RowsWritten, n-before.rowsDone)
	}
	if r.elapsed > 20*time.Second {
		t.Errorf("the next run took %v: did it wait for the 30s lease?", r.elapsed)
	}
	assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
}

// TestRun_RedisDownFencesHolder stops Redis under a holder: it cannot renew,
// so it must stop writing by its local deadline (L2) and exit 4; once Redis
// is back (empty), the next run finishes the copy.
func TestRun_RedisDownFencesHolder(t *testing.T) {
	t.Parallel()
	rs := testsvc.StartRedis(t, false)
	e := newEnv(t)
	const n, ttl = 500000, 2 * time.Second // enough rows to outlast the TTL after the stop
	e.redisURL, e.leaseTTL = rs.URL, ttl.String()
	seedBig(t, e.src, "big", n)
	plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}})

	p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "cut")
	waitProgress(t, p, e.dst, e.name, "big", n/10, n*6/10)
	stopped := time.Now()
	rs.Stop()
	r := p.wait(t)
	wantCode(t, r, 4)
	var last time.Time
	if err := e.dst.QueryRowContext(t.Context(), `SELECT updated_at FROM _migrate_checkpoint WHERE plan = $1`, e.name).Scan(&last); err != nil {
		t.Fatal(err)
	}
	cp := readCheckpoint(t, e.dst, e.name, "big", 0)
	t.Logf("Redis stopped; the holder exited 4 after %v, its last commit %v after the stop, %d rows done",
		time.Since(stopped).Round(time.Millisecond), last.Sub(stopped).Round(time.Millisecond), cp.rowsDone)
	if last.After(stopped.Add(ttl)) {
		t.Errorf("a batch committed %v after Redis stopped, past the lease TTL %v", last.Sub(stopped), ttl)
	}
	if cp.state == "done" || cp.rowsDone >= n {
		t.Fatalf("checkpoint %+v: the copy finished anyway", cp)
	}

	rs.Start()
	r = runMigrate(t, "run", "-p", plan, "--json")
	wantCode(t, r, 0)
	assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
}
