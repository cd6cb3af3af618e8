package main_test

// End-to-end tests of resuming at keys that JSON cannot carry as they are
// (issue 12, item 6): text keys whose bytes are not UTF-8 (a SQL_ASCII
// PostgreSQL database; MySQL latin1 and VARBINARY keys) and double precision
// keys NaN, Infinity and -Infinity. A gate trigger in the target lets one
// more batch through per step, so that every checkpoint lands exactly on
// such a key; each step ends the run there, by halting (then `migrate
// resume`) or by SIGKILL (then a takeover), and the next run resumes from
// the key as stored. The target is checked by SQL, byte for byte.

import (
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/internal/testsvc"
)

// newSQLASCIIDB creates a PostgreSQL database with ENCODING 'SQL_ASCII' and
// the C collation (text compares and sorts by bytes, any bytes but NUL
// allowed) and returns its URL and a pool; it is dropped when the test ends.
func newSQLASCIIDB(t *testing.T) (string, *sql.DB) {
	t.Helper()
	base := testsvc.PostgresURL(t)
	name := testsvc.Prefix(t)
	admin := testsvc.OpenPostgres(t, base)
	q := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	if _, err := admin.ExecContext(t.Context(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(t.Context(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String(), testsvc.OpenPostgres(t, u.String())
}

// rawTable is one table of a raw-key test: its key columns, the DDL of its
// source and target tables (the target's with the fence column), and its
// rows in key order, the last column of each being v, its 1-based position.
type rawTable struct {
	name     string
	key      []string
	cols     []string
	src, dst string
	rows     [][]any
	seed     string            // SQL that inserts the rows instead, if set
	types    map[string]string // the plan's target types
}

// gateSQL creates the target's gate: a table of how many rows (by v) each
// table lets through, and a trigger that refuses any other row with an
// error that is retried (max_retries times, then the shard halts), not one
// that halts at once as bad data, so the batch holding the first refused
// row fails every time.
func gateSQL(eng *engine, tables []rawTable) []string {
	if eng == pgEngine {
		out := []string{`CREATE TABLE gate (tbl text PRIMARY KEY, n int NOT NULL)`,
			`CREATE FUNCTION gate_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.v > (SELECT n FROM gate WHERE tbl = TG_TABLE_NAME) THEN
    RAISE EXCEPTION 'gate: row % of % is not let through yet', NEW.v, TG_TABLE_NAME; -- P0001: retried, not a data error
  END IF;
  RETURN NEW;
END $$`}
		for _, tb := range tables {
			out = append(out, fmt.Sprintf("INSERT INTO gate VALUES ('%s', 0)", tb.name),
				fmt.Sprintf("CREATE TRIGGER %s_gate BEFORE INSERT OR UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION gate_check()", tb.name, tb.name))
		}
		return out
	}
	out := []string{"CREATE TABLE gate (tbl varchar(64) PRIMARY KEY, n int NOT NULL)"}
	for _, tb := range tables {
		for _, ev := range []string{"INSERT", "UPDATE"} {
			out = append(out, fmt.Sprintf("CREATE TRIGGER %s_gate_%s BEFORE %s ON %s FOR EACH ROW "+
				"IF NEW.v > (SELECT n FROM gate WHERE tbl = '%s') THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'gate: row not let through yet'; END IF",
				tb.name, strings.ToLower(ev), ev, tb.name, tb.name))
		}
		out = append(out, fmt.Sprintf("INSERT INTO gate VALUES ('%s', 0)", tb.name))
	}
	return out
}

// lastKeyOf reads the shard's stored cursor as migrate decodes it.
func lastKeyOf(t *testing.T, e *env, tbl string) (string, []any) {
	t.Helper()
	var text sql.NullString
	q := fmt.Sprintf("SELECT last_key FROM _migrate_checkpoint WHERE plan = %s AND tbl = %s AND shard = 0", e.dst.ph(1), e.dst.ph(2))
	if err := e.dstDB.QueryRowContext(t.Context(), q, e.name, tbl).Scan(&text); err != nil || !text.Valid {
		t.Fatalf("last_key of %s: %v (valid %v)", tbl, err, text.Valid)
	}
	k, err := cursor.DecodeKey(text.String)
	if err != nil {
		t.Fatalf("last_key of %s: %v", tbl, err)
	}
	return text.String, k
}

// checkLanded checks that tbl's checkpoint is at row done (state want, or
// any state when want is ""), and that its stored cursor, decoded and bound
// as migrate binds it, finds exactly that row in the source.
func checkLanded(t *testing.T, e *env, tb rawTable, done int64, want string) {
	t.Helper()
	cp, ok := e.checkpointOf(t, tb.name, 0)
	if !ok || cp.rowsDone != done || (want != "" && cp.state != want) {
		t.Fatalf("%s: checkpoint %+v (found %v), want %d rows done, state %q", tb.name, cp, ok, done, want)
	}
	text, key := lastKeyOf(t, e, tb.name)
	where := make([]string, len(tb.key))
	for i, k := range tb.key {
		where[i] = e.src.quote(k) + " = " + e.src.ph(i+1)
	}
	q := "SELECT v FROM " + e.src.quote(tb.name) + " WHERE " + strings.Join(where, " AND ")
	var got []int64
	rows, err := e.srcDB.QueryContext(t.Context(), q, key...)
	if err != nil {
		t.Fatalf("%s: the stored cursor %s (decoded %#v) does not bind: %v", tb.name, text, key, err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int64{done}) {
		t.Fatalf("%s: the stored cursor %s (decoded %#v) finds source rows %v, want exactly row %d (key %#v)",
			tb.name, text, key, got, done, tb.rows[done-1][:len(tb.key)])
	}
	t.Logf("%s: checkpoint at row %d, stored as %s", tb.name, done, text)
}

// setGate lets the first n rows of every table through.
func setGate(t *testing.T, e *env, n int) {
	t.Helper()
	exec1(t, e.dstDB, "UPDATE gate SET n = "+e.dst.ph(1), n)
}

// runRawLadder seeds tables (batch size 2, each with the same number of
// rows) and copies them step by step: step i lets 2i rows through, ends the
// run once the checkpoint is at row 2i — halting on odd steps (then
// `migrate resume`), SIGKILL on even ones (the next run takes over) — and
// checks where the cursor landed. The last run lets everything through and
// must finish with every row in the target exactly once, byte for byte.
func runRawLadder(t *testing.T, e *env, tables []rawTable) {
	t.Helper()
	e.batchSize, e.leaseTTL = 2, "1s"
	n := len(tables[0].rows)
	var specs []planTable
	for _, tb := range tables {
		exec1(t, e.srcDB, tb.src)
		if tb.seed != "" {
			exec1(t, e.srcDB, tb.seed)
		} else {
			insertRows(t, e.src, e.srcDB, tb.name, tb.cols, tb.rows)
		}
		exec1(t, e.dstDB, tb.dst)
		specs = append(specs, planTable{name: tb.name, key: tb.key, types: tb.types})
	}
	for _, q := range gateSQL(e.dst, tables) {
		exec1(t, e.dstDB, q)
	}
	// One plan name, two plan files: a refused batch halts at once in one
	// and is retried for minutes in the other.
	e.maxRetries = 1
	haltPlan := e.plan(t, specs...)
	e.maxRetries = 1000
	killPlan := e.plan(t, specs...)
	for _, p := range []string{haltPlan, killPlan} {
		prependPlan(t, p, "max_takeovers: 100")
	}
	// Every shard held at once: a shard waiting for a slot would never get
	// one while the others wait at the gate.
	parallel := strconv.Itoa(len(tables))

	for step := 1; 2*step < n; step++ {
		done := int64(2 * step)
		setGate(t, e, int(done))
		if step > 1 {
			wantCode(t, runMigrate(t, "resume", "-p", haltPlan), 0)
		}
		if step%2 == 1 {
			// After a kill the run takes each shard over, checking the
			// last batch before the stored cursor against the source.
			var resumeKeys map[string]string
			if step > 1 {
				resumeKeys = map[string]string{}
				for _, tb := range tables {
					resumeKeys[tb.name], _ = lastKeyOf(t, e, tb.name)
				}
			}
			r := runMigrate(t, "run", "-p", haltPlan, "--parallel", parallel, "--json", "--instance", fmt.Sprintf("halting-%d", step))
			if r.code != 5 {
				t.Fatalf("step %d: want exit 5 (halted at the gate), got %s", step, r)
			}
			var rep runReport
			decodeJSON(t, r, &rep)
			if len(rep.Takeovers) != len(resumeKeys) {
				t.Errorf("step %d: %d takeovers, want %d", step, len(rep.Takeovers), len(resumeKeys))
			}
			for _, to := range rep.Takeovers {
				if to.ResumeKey != resumeKeys[to.Table] || to.CheckDiffs != 0 {
					t.Errorf("step %d: takeover of %s resumed at %s with %d differences, want %s and none", step, to.Table, to.ResumeKey, to.CheckDiffs, resumeKeys[to.Table])
				}
			}
			for _, tb := range tables {
				checkLanded(t, e, tb, done, "halted")
			}
			continue
		}
		p := startMigrate(t, "run", "-p", killPlan, "--parallel", parallel, "--instance", fmt.Sprintf("killed-%d", step))
		for _, tb := range tables {
			poll(t, 60*time.Second, fmt.Sprintf("%s at row %d", tb.name, done), func() bool {
				select {
				case <-p.done:
					t.Fatalf("step %d: migrate exited before the gate:\n%s", step, p.wait(t))
				default:
				}
				cp, ok := e.checkpointOf(t, tb.name, 0)
				return ok && cp.rowsDone >= done
			})
		}
		p.kill(t)
		for _, tb := range tables {
			checkLanded(t, e, tb, done, "running")
		}
	}

	setGate(t, e, n)
	wantCode(t, runMigrate(t, "resume", "-p", haltPlan), 0)
	r := runMigrate(t, "run", "-p", killPlan, "--parallel", parallel, "--json", "--instance", "last")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	if rep.Verify == nil || !rep.Verify.Equal {
		t.Errorf("the last run's verification %+v, want equal", rep.Verify)
	}
	for _, tb := range tables {
		checkLanded(t, e, tb, int64(n), "done")
		src, dst := rawRows(t, e.src, e.srcDB, tb), rawRows(t, e.dst, e.dstDB, tb)
		if len(src) != n || !slices.Equal(src, dst) {
			t.Errorf("%s: source rows %q\ntarget rows %q\nwant the %d source rows, each once, byte for byte", tb.name, src, dst, n)
		}
		if c := queryInt(t, e.dstDB, "SELECT count(*) FROM "+e.dst.quote(tb.name)+" WHERE _fence <= 0"); c != 0 {
			t.Errorf("%s: %d target rows without a fence token", tb.name, c)
		}
	}
}

// rawRows reads every row of tb in key order as the hex of each column's
// stored bytes (a double's binary form), so that no conversion can hide a
// difference: MySQL's HEX() of the bytes in the column's own character
// set, the bytes pgx hands over from PostgreSQL (a SQL_ASCII database
// converts nothing).
func rawRows(t *testing.T, eng *engine, db *sql.DB, tb rawTable) []string {
	t.Helper()
	sel := make([]string, len(tb.cols))
	for i, c := range tb.cols {
		switch {
		case eng == pgEngine && c == "x":
			sel[i] = "float8send(x)"
		case eng == pgEngine:
			sel[i] = ident(c)
		default:
			sel[i] = "LOWER(HEX(CAST(" + eng.quote(c) + " AS BINARY)))"
		}
	}
	order := make([]string, len(tb.key))
	for i, k := range tb.key {
		order[i] = eng.quote(k)
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + eng.quote(tb.name) + " ORDER BY " + strings.Join(order, ", ")
	rows, err := db.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(sel))
		ptrs := make([]any, len(sel))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = string(v)
			if eng == pgEngine {
				parts[i] = hex.EncodeToString(v)
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// nonUTF8Keys are text keys in byte order, every second one (a checkpoint
// with batches of 2) not UTF-8 but the last but one.
var nonUTF8Keys = []string{"A", "a\x80", "a\x81", "a\x9d", "a\xe9b", "a\xe9c", "a\xef", "a\xff", "b", "\xc3\x28", "\xc3\xa9", "\xff"}

// TestRun_ResumeAtNonUTF8TextKey: a SQL_ASCII PostgreSQL database hands
// text keys over as the bytes stored, which need not be UTF-8; a resume at
// such a key must start right after it (a key changed to U+FFFD skips rows).
// The target is another SQL_ASCII database, or MySQL with VARBINARY columns
// (the checkpoint then lives in MySQL).
func TestRun_ResumeAtNonUTF8TextKey(t *testing.T) {
	t.Parallel()
	for _, dst := range []*engine{pgEngine, mysqlEngine} {
		t.Run("to_"+dst.name, func(t *testing.T) {
			t.Parallel()
			e := bareEnv(t, pgEngine, dst)
			e.srcURL, e.srcDB = newSQLASCIIDB(t)
			text := rawTable{name: "rk", key: []string{"k"}, cols: []string{"k", "payload", "v"},
				src: "CREATE TABLE rk (k text PRIMARY KEY, payload text, v int NOT NULL)",
				dst: "CREATE TABLE rk (k text PRIMARY KEY, payload text, v int NOT NULL, _fence bigint NOT NULL DEFAULT 0)"}
			if dst == pgEngine {
				e.dstURL, e.dstDB = newSQLASCIIDB(t)
			} else {
				e.dstURL, e.dstDB = dst.newDB(t)
				text.dst = "CREATE TABLE rk (k varbinary(8) NOT NULL PRIMARY KEY, payload varbinary(16), v int NOT NULL, _fence bigint NOT NULL DEFAULT 0)"
				text.types = map[string]string{"k": "varbinary(8)", "payload": "varbinary(16)"}
			}
			for i, k := range nonUTF8Keys {
				text.rows = append(text.rows, []any{k, "p\xfe" + k, i + 1})
			}
			runRawLadder(t, e, []rawTable{text})
		})
	}
}

// TestRun_ResumeAtNonFiniteFloatKey: double precision keys NaN, Infinity
// and -Infinity must be stored as the cursor and resumed at (they could not
// be encoded, halting the shard); the database sets extra_float_digits = 0.
func TestRun_ResumeAtNonFiniteFloatKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgEngine, pgEngine)
	// (g, x) in key order: NaN sorts above every number, Infinity just below.
	floats := rawTable{name: "rf", key: []string{"g", "x"}, cols: []string{"g", "x", "v"},
		src: "CREATE TABLE rf (g int NOT NULL, x double precision NOT NULL, v int NOT NULL, PRIMARY KEY (g, x))",
		dst: "CREATE TABLE rf (g int NOT NULL, x double precision NOT NULL, v int NOT NULL, _fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (g, x))"}
	for i, gx := range [][2]string{{"0", "-1.5"}, {"0", "Infinity"}, {"0", "NaN"}, {"1", "-Infinity"}, {"1", "0"}, {"1", "NaN"},
		{"2", "-Infinity"}, {"2", "5e-324"}, {"2", "Infinity"}, {"2", "NaN"}, {"3", "0.1"}, {"3", "Infinity"}} {
		floats.rows = append(floats.rows, []any{gx[0], gx[1], i + 1})
	}
	runRawLadder(t, e, []rawTable{floats})
}

// TestMySQL_ResumeAtBinaryAndLatin1Key: MySQL keys whose bytes are not
// UTF-8: VARBINARY and BINARY (go-sql-driver hands over the bytes, BINARY's
// zero padding included, as []byte) and latin1 VARCHAR (the server converts
// the text to the connection's utf8mb4; binding it back converts it to
// latin1 again), resumed at each.
func TestMySQL_ResumeAtBinaryAndLatin1Key(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mysqlEngine, mysqlEngine)
	bin := rawTable{name: "bk", key: []string{"k"}, cols: []string{"k", "v"},
		src: "CREATE TABLE bk (k varbinary(8) NOT NULL PRIMARY KEY, v int NOT NULL)",
		dst: "CREATE TABLE bk (k varbinary(8) NOT NULL PRIMARY KEY, v int NOT NULL, _fence bigint NOT NULL DEFAULT 0)"}
	latin := rawTable{name: "lk", key: []string{"k"}, cols: []string{"k", "v"},
		src: "CREATE TABLE lk (k varchar(8) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL PRIMARY KEY, v int NOT NULL)",
		dst: "CREATE TABLE lk (k varchar(8) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL PRIMARY KEY, v int NOT NULL, _fence bigint NOT NULL DEFAULT 0)"}
	fixed := rawTable{name: "fk", key: []string{"k"}, cols: []string{"k", "v"},
		src: "CREATE TABLE fk (k binary(4) NOT NULL PRIMARY KEY, v int NOT NULL)",
		dst: "CREATE TABLE fk (k binary(4) NOT NULL PRIMARY KEY, v int NOT NULL, _fence bigint NOT NULL DEFAULT 0)"}
	for i, k := range nonUTF8Keys {
		bin.rows = append(bin.rows, []any{[]byte(k), i + 1})
		latin.rows = append(latin.rows, []any{[]byte(k), i + 1})
		fixed.rows = append(fixed.rows, []any{[]byte(k), i + 1})
	}
	// The same bytes, as latin1 text (0x80 is €, 0x81 and 0x9d unassigned).
	latin.seed = "INSERT INTO lk SELECT CONVERT(k USING latin1), v FROM bk"
	runRawLadder(t, e, []rawTable{bin, latin, fixed})
}
