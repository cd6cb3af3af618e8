package main_test

// End-to-end tests of the migrate binary: TestMain builds it once, each test
// drives it with os/exec against real PostgreSQL and Redis (internal/testsvc),
// with its own source and target databases and a unique plan name, and checks
// the target by SQL rather than by migrate's own verification.

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-dev/migrate/drill"
	"github.com/migrate-dev/migrate/internal/testsvc"
)

// migrateBin is the binary built by TestMain.
var migrateBin string

func TestMain(m *testing.M) { os.Exit(buildAndRun(m)) }

// buildAndRun builds ./cmd/migrate into a temporary folder (with -race when
// MIGRATE_E2E_RACE is set) and runs the tests.
func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "migrate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	migrateBin = filepath.Join(dir, "migrate")
	args := []string{"build", "-o", migrateBin}
	if os.Getenv("MIGRATE_E2E_RACE") != "" {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/migrate")...)
	cmd.Dir = filepath.Join("..", "..") // the repository root, from cmd/migrate
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/migrate: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// processTimeout bounds every child process; a hang fails the test.
const processTimeout = 2 * time.Minute

// result is a finished migrate process.
type result struct {
	code           int // -1 when killed by a signal
	stdout, stderr string
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %v\n--- stdout\n%s--- stderr\n%s", r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
}

// syncBuffer is a bytes.Buffer safe to read while the child writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running migrate process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	start          time.Time
	done           chan struct{}
}

// startMigrate starts the binary with args; it is killed when the test ends.
func startMigrate(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.CommandContext(t.Context(), migrateBin, args...)
	p.cmd.Env = childEnv()
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start migrate: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

// wait waits for the process to exit, at most processTimeout.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(processTimeout - time.Since(p.start)):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("migrate %v did not exit within %v\n%s", p.cmd.Args[1:], processTimeout, p.stderr.String())
	}
	return result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String(), elapsed: time.Since(p.start)}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t *testing.T) result {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("kill migrate: %v", err)
	}
	return p.wait(t)
}

// runMigrate runs the binary to completion.
func runMigrate(t *testing.T, args ...string) result {
	t.Helper()
	return startMigrate(t, args...).wait(t)
}

// childEnv is the test's environment without the MIGRATE_* fallbacks of the
// CLI, so a developer's shell cannot change what a test runs.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MIGRATE_PLAN", "MIGRATE_SOURCE", "MIGRATE_TARGET", "MIGRATE_REDIS":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func wantCode(t *testing.T, r result, want int) {
	t.Helper()
	if r.code != want {
		t.Fatalf("want exit %d, got %s", want, r)
	}
}

// env is one test's services: fresh source and target databases, Redis, and
// a unique plan name.
type env struct {
	name           string
	srcURL, dstURL string
	redisURL       string
	src, dst       *sql.DB
	leaseTTL       string
	batchSize      int
	extra          string // more plan lines, e.g. "max_takeovers: 1\n"
	planDir        string
	plans          int // plan files written
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{name: testsvc.Prefix(t), srcURL: testsvc.NewPostgresDB(t), dstURL: testsvc.NewPostgresDB(t),
		redisURL: testsvc.RedisURL(t), leaseTTL: "30s", batchSize: 1000, planDir: t.TempDir()}
	e.src, e.dst = testsvc.OpenPostgres(t, e.srcURL), testsvc.OpenPostgres(t, e.dstURL)
	return e
}

// tableSpec is one table entry of a plan file.
type tableSpec struct {
	name, target string
	key, columns []string
	shards       int
}

// writePlan writes a plan file (SPEC §3) for e and returns its path.
func (e *env) writePlan(t *testing.T, tables ...tableSpec) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nsource: %q\ntarget: %q\nredis: %q\nlease_ttl: %s\nbatch_size: %d\n%stables:\n",
		e.name, e.srcURL, e.dstURL, e.redisURL, e.leaseTTL, e.batchSize, e.extra)
	for _, tb := range tables {
		fmt.Fprintf(&b, "  - name: %s\n    key: [%s]\n", tb.name, strings.Join(tb.key, ", "))
		if tb.target != "" {
			fmt.Fprintf(&b, "    target: %s\n", tb.target)
		}
		if tb.columns != nil {
			fmt.Fprintf(&b, "    columns: [%s]\n", strings.Join(tb.columns, ", "))
		}
		if tb.shards > 0 {
			fmt.Fprintf(&b, "    shards: %d\n", tb.shards)
		}
	}
	e.plans++
	path := filepath.Join(e.planDir, fmt.Sprintf("plan%d.yaml", e.plans))
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func exec1(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func queryInt(t *testing.T, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func ident(parts ...string) string { return pgx.Identifier(parts).Sanitize() }

// itemsColumns are the columns of seedItems' table.
var itemsColumns = []string{"id", "ext", "name", "amount", "created_at", "doc", "blob", "flag"}

// seedItems creates table with many column types and n rows (even ids): text
// with NULL, ” and emoji, numeric(12,2), timestamptz with microseconds,
// jsonb, bytea and bool.
func seedItems(t *testing.T, db *sql.DB, table string, n int) {
	t.Helper()
	exec1(t, db, `CREATE TABLE `+ident(table)+` (
  id bigint PRIMARY KEY, ext uuid NOT NULL, name text, amount numeric(12,2),
  created_at timestamptz, doc jsonb, blob bytea, flag boolean)`)
	exec1(t, db, `INSERT INTO `+ident(table)+` SELECT 2 * g, md5(g::text)::uuid,
  CASE g % 7 WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN 'emoji 🚀🧪 ' || g
    WHEN 3 THEN E'quote '' backslash \\ tab\t newline\n' || g ELSE 'name ' || g END,
  CASE WHEN g % 11 = 0 THEN NULL ELSE ((g * 7919) % 100000000)::numeric / 100 - 400000 END,
  CASE WHEN g % 13 = 0 THEN NULL ELSE timestamptz '2020-01-01 00:00:00.123456+00' + g * interval '1 hour 1 microsecond' END,
  CASE WHEN g % 5 = 0 THEN NULL ELSE jsonb_build_object('g', g, 'tags', jsonb_build_array('a', g % 3), 'u', 'ü') END,
  CASE WHEN g % 9 = 0 THEN NULL WHEN g % 9 = 1 THEN ''::bytea ELSE decode(md5(g::text), 'hex') || '\x00ff'::bytea END,
  CASE WHEN g % 3 = 0 THEN NULL ELSE g % 2 = 0 END
FROM generate_series(1, $1::int) g`, n)
	exec1(t, db, `ANALYZE `+ident(table))
}

// seedBig creates a narrow table of n rows (ids 1..n) for long runs.
func seedBig(t *testing.T, db *sql.DB, table string, n int) {
	t.Helper()
	exec1(t, db, `CREATE TABLE `+ident(table)+` (id bigint PRIMARY KEY, payload text, n integer)`)
	exec1(t, db, `INSERT INTO `+ident(table)+` SELECT g, 'row ' || g || repeat('x', g % 40), g % 1000 FROM generate_series(1, $1::int) g`, n)
	exec1(t, db, `ANALYZE `+ident(table))
}

var bigColumns = []string{"id", "payload", "n"}

// tableDigest returns the row count and an md5 over the rows' text forms in
// key order, of cols of table.
func tableDigest(t *testing.T, db *sql.DB, table string, cols, key []string) (int64, string) {
	t.Helper()
	qc := make([]string, len(cols))
	for i, c := range cols {
		qc[i] = ident(c)
	}
	qk := make([]string, len(key))
	for i, k := range key {
		qk[i] = "r." + ident(k)
	}
	q := `SELECT count(*), coalesce(md5(string_agg(r::text, '|' ORDER BY ` + strings.Join(qk, ", ") + `)), '')
FROM (SELECT ` + strings.Join(qc, ", ") + ` FROM ` + ident(strings.Split(table, ".")...) + `) r`
	var n int64
	var sum string
	if err := db.QueryRowContext(t.Context(), q).Scan(&n, &sum); err != nil {
		t.Fatalf("digest of %s: %v", table, err)
	}
	return n, sum
}

// assertSameRows compares source and target tables by SQL: same count and
// the same digest of cols in key order, and every target row carries a
// positive fence token.
func assertSameRows(t *testing.T, e *env, srcTable, dstTable string, cols, key []string, want int64) {
	t.Helper()
	sn, ssum := tableDigest(t, e.src, srcTable, cols, key)
	dn, dsum := tableDigest(t, e.dst, dstTable, cols, key)
	if sn != want || dn != want || ssum != dsum {
		t.Fatalf("%s -> %s: source %d rows (md5 %s), target %d rows (md5 %s), want %d rows and equal digests",
			srcTable, dstTable, sn, ssum, dn, dsum, want)
	}
	if n := queryInt(t, e.dst, `SELECT count(*) FROM `+ident(strings.Split(dstTable, ".")...)+` WHERE _fence <= 0`); n != 0 {
		t.Fatalf("%s: %d rows without a fence token", dstTable, n)
	}
}

// checkpoint is one row of the target's _migrate_checkpoint.
type checkpoint struct {
	rowsDone, token int64
	state           string
}

func readCheckpoint(t *testing.T, db *sql.DB, plan, table string, shard int) checkpoint {
	t.Helper()
	cp, err := tryCheckpoint(t, db, plan, table, shard)
	if err != nil {
		t.Fatalf("checkpoint of %s/%s#%d: %v", plan, table, shard, err)
	}
	return cp
}

func tryCheckpoint(t *testing.T, db *sql.DB, plan, table string, shard int) (checkpoint, error) {
	var cp checkpoint
	err := db.QueryRowContext(t.Context(), `SELECT rows_done, token, state FROM _migrate_checkpoint WHERE plan = $1 AND tbl = $2 AND shard = $3`,
		plan, table, shard).Scan(&cp.rowsDone, &cp.token, &cp.state)
	return cp, err
}

// readFence returns the watermark row of one shard.
func readFence(t *testing.T, db *sql.DB, plan, table string, shard int) (int64, string) {
	t.Helper()
	var tok int64
	var owner string
	if err := db.QueryRowContext(t.Context(), `SELECT token, owner FROM _migrate_fence WHERE plan = $1 AND tbl = $2 AND shard = $3`,
		plan, table, shard).Scan(&tok, &owner); err != nil {
		t.Fatalf("fence of %s/%s#%d: %v", plan, table, shard, err)
	}
	return tok, owner
}

// waitProgress polls the checkpoints of table (all shards) until at least lo
// rows are done and returns the rows done then; it fails when the copy got
// past hi first or the process exited.
func waitProgress(t *testing.T, p *proc, db *sql.DB, plan, table string, lo, hi int64) int64 {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		var done int64
		err := db.QueryRowContext(t.Context(), `SELECT coalesce(sum(rows_done), 0)::bigint FROM _migrate_checkpoint WHERE plan = $1 AND tbl = $2`,
			plan, table).Scan(&done)
		if err == nil && done >= lo {
			if done >= hi {
				t.Fatalf("the copy went from below %d to %d rows between two polls: too fast to interrupt", lo, done)
			}
			return done
		}
		select {
		case <-p.done:
			t.Fatalf("migrate exited before %d rows were done:\n%s", lo, p.wait(t))
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("no progress to %d rows within 90s\n%s", lo, p.stderr.String())
	return 0
}

// poll calls fn until it returns true, failing after timeout.
func poll(t *testing.T, timeout time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writesToTable is n_tup_ins + n_tup_upd of a table once the counters have
// settled: other backends flush their statistics asynchronously (at most
// every second, and when they exit), so it polls until the sum reaches
// atLeast and stays unchanged for 1.5s.
func writesToTable(t *testing.T, db *sql.DB, table string, atLeast int64) int64 {
	t.Helper()
	q := `SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0)::bigint FROM pg_stat_user_tables WHERE relid = $1::regclass`
	var last int64 = -1
	stableSince := time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := queryInt(t, db, q, ident(table))
		if n != last {
			last, stableSince = n, time.Now()
		} else if n >= atLeast && time.Since(stableSince) >= 1500*time.Millisecond {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("pg_stat_user_tables for %s did not settle at >= %d within 30s (last %d)", table, atLeast, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// proxied starts a drill.Proxy in front of the host:port of rawURL and
// returns it with rawURL rewritten to go through it; the proxy is closed
// when the test ends.
func proxied(t *testing.T, name, rawURL string) (*drill.Proxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	px, err := drill.NewProxy(name, u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	u.Host = px.Addr()
	return px, u.String()
}
