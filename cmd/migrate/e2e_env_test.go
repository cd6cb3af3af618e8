package main_test

// The one end-to-end harness, for every engine pair: a test's fresh source
// and target databases (PostgreSQL or MySQL/MariaDB at either end), Redis,
// a unique plan name, plan files, and reads of the target's checkpoints and
// watermarks that hold for either target engine. The conformance suite and
// the fault, takeover, outage and recovery tests all run through it;
// inDirections runs a test once per engine pair.

import (
	"database/sql"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// engine is what the tests need to know of one database engine.
type engine struct {
	name  string
	newDB func(t *testing.T) (string, *sql.DB)
	quote func(name string) string
	ph    func(i int) string // the i-th bind parameter, from 1
	types map[string]string  // logical column type -> this engine's DDL
}

var pgEngine = &engine{
	name: "postgres",
	newDB: func(t *testing.T) (string, *sql.DB) {
		u := testsvc.NewPostgresDB(t)
		db := testsvc.OpenPostgres(t, u)
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		// Unfriendly server defaults a DBA may set: migrate must not depend
		// on the session time zone or on text formats.
		for _, set := range []string{"timezone = 'Asia/Kathmandu'", "DateStyle = 'SQL, DMY'", "extra_float_digits = 0", "bytea_output = 'escape'"} {
			exec1(t, db, "ALTER DATABASE "+ident(strings.TrimPrefix(p.Path, "/"))+" SET "+set)
		}
		return u, db
	},
	quote: func(name string) string { return ident(name) },
	ph:    func(i int) string { return "$" + strconv.Itoa(i) },
	types: map[string]string{
		"integer": "integer", "bigint": "bigint", "varchar": "varchar(64)", "text": "text", "decimal": "numeric(12,3)",
		"double": "double precision", "float": "real", "boolean": "boolean", "date": "date", "timestamp": "timestamp", "timestamptz": "timestamptz",
		"uuid": "uuid", "json": "jsonb", "bytes": "bytea", "numeric": "numeric",
		"keytext": "text", "keyvarchar": "varchar(32)", // string keys: binary order, case- and space-sensitive
	},
}

var mysqlEngine = &engine{
	name: "mysql",
	newDB: func(t *testing.T) (string, *sql.DB) {
		u := testsvc.NewMySQLDB(t)
		return u, testsvc.OpenMySQL(t, u)
	},
	quote: func(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" },
	ph:    func(int) string { return "?" },
	types: map[string]string{
		"integer": "int", "bigint": "bigint", "varchar": "varchar(64)", "text": "longtext", "decimal": "decimal(12,3)",
		"double": "double", "float": "float", "boolean": "tinyint(1)", "date": "date", "timestamp": "datetime(6)",
		"timestamptz": "timestamp(6) NULL DEFAULT NULL", "uuid": "char(36)", "json": "json", "bytes": "longblob",
		// NO PAD, so "a" and "a " are distinct keys as in PostgreSQL
		// (MariaDB's utf8mb4_bin is PAD SPACE; MySQL 8 has utf8mb4_0900_bin).
		"keytext":    "varchar(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
		"keyvarchar": "varchar(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
		"zerodate":   "date", "zerodatetime": "datetime", // sql_mode permitting
	},
}

// table quotes a table name that may be schema-qualified ("public.big").
func (eng *engine) table(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = eng.quote(p)
	}
	return strings.Join(parts, ".")
}

// schema is the SQL expression of the connection's schema (PostgreSQL) or
// database (MySQL), as information_schema names it.
func (eng *engine) schema() string {
	if eng == mysqlEngine {
		return "DATABASE()"
	}
	return "current_schema()"
}

// direction is an engine pair: from the source's engine to the target's.
type direction struct{ src, dst *engine }

func (d direction) String() string { return d.src.name + "_to_" + d.dst.name }

var (
	pgToPG = direction{pgEngine, pgEngine}
	pgToMy = direction{pgEngine, mysqlEngine}
	myToPG = direction{mysqlEngine, pgEngine}
	myToMy = direction{mysqlEngine, mysqlEngine}

	// directions are the four engine pairs.
	directions = []direction{pgToPG, pgToMy, myToPG, myToMy}
	// sameEngine are the pairs the heavy fault matrix runs on: each engine
	// as source and target at once. The two cross pairs run one test of
	// each kind of fault (see the table in inDirections' callers).
	sameEngine = []direction{pgToPG, myToMy}
)

// inDirections runs test as a parallel subtest per direction, named as the
// conformance suite names them ("postgres_to_mysql"), each with its own
// fresh env.
func inDirections(t *testing.T, dirs []direction, test func(t *testing.T, e *env)) {
	t.Helper()
	for _, d := range dirs {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			test(t, newEnv(t, d.src, d.dst))
		})
	}
}

// env is one test's services: fresh source and target databases on an
// engine pair, Redis, a unique plan name, and the settings of its plans.
type env struct {
	name           string
	src, dst       *engine
	srcURL, dstURL string
	redisURL       string
	lock           string // the plan's lock: ("db", an etcd:// or zk:// URL); "" for redis: redisURL
	srcDB, dstDB   *sql.DB
	leaseTTL       string
	batchSize      int
	maxRetries     int    // 0: the default
	extra          string // more top-level plan lines, e.g. "max_takeovers: 1\n"
	dir            string // plan files
	plans          int    // plan files written
}

// newEnv creates fresh source and target databases of the engines src and
// dst; both are dropped when the test ends.
func newEnv(t *testing.T, src, dst *engine) *env {
	t.Helper()
	e := bareEnv(t, src, dst)
	e.srcURL, e.srcDB = src.newDB(t)
	e.dstURL, e.dstDB = dst.newDB(t)
	return e
}

// bareEnv is an env without databases, for a test that brings its own
// servers (TLS, passwords) and sets the URLs itself.
func bareEnv(t *testing.T, src, dst *engine) *env {
	t.Helper()
	return &env{name: testsvc.Prefix(t), src: src, dst: dst, redisURL: testsvc.RedisURL(t),
		leaseTTL: "30s", batchSize: 1000, dir: t.TempDir()}
}

// planTable is one table entry of a plan.
type planTable struct {
	name, target string
	key, columns []string          // key nil: the source's primary key
	types        map[string]string // target column type overrides
	shards       int               // 0: the default
}

// plan writes a plan file (SPEC §3) for e and returns its path. Table,
// column and key names are YAML-quoted: some tests' names hold quotes,
// backticks and spaces.
func (e *env) plan(t *testing.T, tables ...planTable) string {
	t.Helper()
	quoted := func(names []string) string {
		q := make([]string, len(names))
		for i, n := range names {
			q[i] = strconv.Quote(n)
		}
		return strings.Join(q, ", ")
	}
	var b strings.Builder
	lockLine := fmt.Sprintf("redis: %q", e.redisURL)
	if e.lock != "" {
		lockLine = fmt.Sprintf("lock: %q", e.lock)
	}
	fmt.Fprintf(&b, "name: %s\nsource: %q\ntarget: %q\n%s\nlease_ttl: %s\nbatch_size: %d\n",
		e.name, e.srcURL, e.dstURL, lockLine, e.leaseTTL, e.batchSize)
	if e.maxRetries > 0 {
		fmt.Fprintf(&b, "max_retries: %d\n", e.maxRetries)
	}
	b.WriteString(e.extra)
	if len(tables) > 0 {
		b.WriteString("tables:\n") // none: discovery
	}
	for _, tb := range tables {
		fmt.Fprintf(&b, "  - name: %q\n", tb.name)
		if tb.key != nil {
			fmt.Fprintf(&b, "    key: [%s]\n", quoted(tb.key))
		}
		if tb.target != "" {
			fmt.Fprintf(&b, "    target: %q\n", tb.target)
		}
		if tb.columns != nil {
			fmt.Fprintf(&b, "    columns: [%s]\n", quoted(tb.columns))
		}
		if tb.shards > 0 {
			fmt.Fprintf(&b, "    shards: %d\n", tb.shards)
		}
		if len(tb.types) > 0 {
			b.WriteString("    types:\n")
			for _, c := range slices.Sorted(maps.Keys(tb.types)) {
				fmt.Fprintf(&b, "      %q: %q\n", c, tb.types[c])
			}
		}
	}
	e.plans++
	path := filepath.Join(e.dir, fmt.Sprintf("plan%d.yaml", e.plans))
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkpoint is one row of the target's _migrate_checkpoint.
type checkpoint struct {
	rowsDone, token int64
	state           string
}

func (e *env) queryCheckpoint(t *testing.T, tbl string, shard int) (checkpoint, error) {
	t.Helper()
	var cp checkpoint
	q := fmt.Sprintf("SELECT rows_done, token, state FROM _migrate_checkpoint WHERE plan = %s AND tbl = %s AND shard = %s",
		e.dst.ph(1), e.dst.ph(2), e.dst.ph(3))
	err := e.dstDB.QueryRowContext(t.Context(), q, e.name, tbl, shard).Scan(&cp.rowsDone, &cp.token, &cp.state)
	return cp, err
}

// checkpointOf reads one shard's checkpoint from the target; ok is false
// while it does not exist yet.
func (e *env) checkpointOf(t *testing.T, tbl string, shard int) (cp checkpoint, ok bool) {
	t.Helper()
	cp, err := e.queryCheckpoint(t, tbl, shard)
	return cp, err == nil
}

// checkpoint reads one shard's checkpoint from the target, failing the
// test when there is none.
func (e *env) checkpoint(t *testing.T, tbl string, shard int) checkpoint {
	t.Helper()
	cp, err := e.queryCheckpoint(t, tbl, shard)
	if err != nil {
		t.Fatalf("checkpoint of %s/%s#%d: %v", e.name, tbl, shard, err)
	}
	return cp
}

// fence reads one shard's watermark from the target.
func (e *env) fence(t *testing.T, tbl string, shard int) (tok int64, owner string) {
	t.Helper()
	q := fmt.Sprintf("SELECT token, owner FROM _migrate_fence WHERE plan = %s AND tbl = %s AND shard = %s",
		e.dst.ph(1), e.dst.ph(2), e.dst.ph(3))
	if err := e.dstDB.QueryRowContext(t.Context(), q, e.name, tbl, shard).Scan(&tok, &owner); err != nil {
		t.Fatalf("fence of %s/%s#%d: %v", e.name, tbl, shard, err)
	}
	return tok, owner
}

// fenceOwners lists the owners of e's watermark rows, one per shard.
func (e *env) fenceOwners(t *testing.T) []string {
	t.Helper()
	return queryStrings(t, e.dstDB, "SELECT owner FROM _migrate_fence WHERE plan = "+e.dst.ph(1)+" ORDER BY tbl, shard", e.name)
}

// shardsDone counts e's checkpoints in state done.
func (e *env) shardsDone(t *testing.T) int64 {
	t.Helper()
	return queryInt(t, e.dstDB, "SELECT count(*) FROM _migrate_checkpoint WHERE plan = "+e.dst.ph(1)+" AND state = 'done'", e.name)
}

// rowsDone is the rows done of every shard of table, 0 before the first
// checkpoint (and before the checkpoint table exists).
func (e *env) rowsDone(t *testing.T, table string) (int64, error) {
	t.Helper()
	var done sql.NullInt64
	q := fmt.Sprintf("SELECT sum(rows_done) FROM _migrate_checkpoint WHERE plan = %s AND tbl = %s", e.dst.ph(1), e.dst.ph(2))
	err := e.dstDB.QueryRowContext(t.Context(), q, e.name, table).Scan(&done)
	return done.Int64, err
}

// mustRowsDone is rowsDone, failing the test on an error.
func (e *env) mustRowsDone(t *testing.T, table string) int64 {
	t.Helper()
	n, err := e.rowsDone(t, table)
	if err != nil {
		t.Fatalf("rows done of %s: %v", table, err)
	}
	return n
}

// waitProgress polls the checkpoints of table (all shards) until at least lo
// rows are done and returns the rows done then; it fails when the copy got
// past hi first or the process exited.
func (e *env) waitProgress(t *testing.T, p *proc, table string, lo, hi int64) int64 {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		done, err := e.rowsDone(t, table)
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

// hasTable reports whether the target has a table (or view) name.
func (e *env) hasTable(t *testing.T, name string) bool {
	t.Helper()
	return queryInt(t, e.dstDB, "SELECT count(*) FROM information_schema.tables WHERE table_schema = "+e.dst.schema()+
		" AND table_name = "+e.dst.ph(1), name) > 0
}

// writeCounter counts the row writes to a target table: the row versions
// inserted or updated, by transactions that committed or rolled back.
type writeCounter struct {
	e     *env
	table string
	reads int64 // MySQL: counter values taken by reads
}

// countWrites starts counting the row writes to table in e's target.
// PostgreSQL counts them itself (pg_stat_user_tables). MySQL does not (its
// performance_schema is off by default in MariaDB), so with a MySQL target
// the table must exist: a trigger after each row's insert and update takes
// a value of an InnoDB AUTO_INCREMENT counter, which a rollback does not
// give back, and which holds no lock past the single-row insert (a
// non-transactional MyISAM counter would: its table lock lasts a LOAD
// DATA's whole statement, a gate's wait included, and serialises shards).
func (e *env) countWrites(t *testing.T, table string) *writeCounter {
	t.Helper()
	w := &writeCounter{e: e, table: table}
	if e.dst != mysqlEngine {
		return w
	}
	counter := e.dst.quote(table + "_writes")
	exec1(t, e.dstDB, "CREATE TABLE "+counter+" (n bigint NOT NULL AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB")
	for _, ev := range []string{"INSERT", "UPDATE"} {
		exec1(t, e.dstDB, fmt.Sprintf("CREATE TRIGGER %s AFTER %s ON %s FOR EACH ROW INSERT INTO %s () VALUES ()",
			e.dst.quote(table+"_writes_"+strings.ToLower(ev)), ev, e.dst.quote(table), counter))
	}
	return w
}

// count is the row writes counted so far.
func (w *writeCounter) count(t *testing.T) int64 {
	t.Helper()
	if w.e.dst != mysqlEngine {
		return queryInt(t, w.e.dstDB, `SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0)::bigint FROM pg_stat_user_tables WHERE relid = $1::regclass`, ident(w.table))
	}
	// The next counter value, taken on a connection of its own, is one
	// above every value taken before it: the writes' and the reads'.
	conn, err := w.e.dstDB.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := conn.ExecContext(t.Context(), "INSERT INTO "+w.e.dst.quote(w.table+"_writes")+" () VALUES ()")
	if err != nil {
		t.Fatalf("count the writes to %s: %v", w.table, err)
	}
	next, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	w.reads++
	return next - w.reads
}

// settled is the count once it is final. PostgreSQL's backends flush their
// statistics asynchronously (at most every second, and when they exit), so
// it polls until the count reaches atLeast and stays unchanged for 1.5s;
// MySQL's count is taken with each row.
func (w *writeCounter) settled(t *testing.T, atLeast int64) int64 {
	t.Helper()
	stable := 1500 * time.Millisecond
	if w.e.dst == mysqlEngine {
		stable = 0
	}
	var last int64 = -1
	stableSince := time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := w.count(t)
		if n != last {
			last, stableSince = n, time.Now()
		}
		if n >= atLeast && time.Since(stableSince) >= stable {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("the row writes to %s did not settle at >= %d within 30s (last %d)", w.table, atLeast, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
