package main_test

// TestConformance is the one suite every engine pair must pass (the
// golang-migrate database/testing habit): the same cases, seeded from the
// same Go values with each engine's own column types, run for PostgreSQL and
// MySQL/MariaDB at both ends. The target is checked by a canonical dump
// written here, never by migrate's own verification.

import (
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		run    func(t *testing.T, e *env)
		source *engine // only from this source engine: the others cannot hold such values
	}{
		{"full_copy", confFullCopy, nil},
		{"type_mapping", confTypeMapping, nil},
		{"sigkill_resume", confKillResume, nil},
		{"stale_token_rejected", confStaleToken, nil},
		{"lower_token_never_overwrites", confLowerToken, nil},
		{"string_and_composite_keys", confKeys, nil},
		{"reshard_after_takeover", confReshard, nil},
		{"float_nan_inf", confNaN, pgEngine},                 // MySQL cannot store NaN or infinities
		{"zero_dates", confZeroDates, mysqlEngine},           // PostgreSQL has no zero dates
		{"numeric_without_precision", confNumeric, pgEngine}, // MySQL has no unbounded numeric
		{"float_exact", confFloat, nil},
		{"enum_set_case", confEnumCase, mysqlEngine}, // MySQL ENUM and SET
	}
	for _, dir := range directions {
		t.Run(dir.String(), func(t *testing.T) {
			for _, c := range cases {
				if c.source != nil && c.source != dir.src {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, newEnv(t, dir.src, dir.dst))
				})
			}
		})
	}
}

// ordersTable has a value of every common type: extremes, NULL next to
// empty, trailing zeros, microseconds, 4-byte UTF-8, a value over 1 MB.
func ordersTable() *table {
	tb := &table{name: "orders", key: []string{"id"}, cols: []col{
		{"id", "bigint", kNum}, {"name", "varchar", kText}, {"note", "text", kText}, {"amount", "decimal", kNum},
		{"i32", "integer", kNum}, {"i64", "bigint", kNum}, {"ratio", "double", kFloat}, {"paid", "boolean", kBool},
		{"day", "date", kDate}, {"ts", "timestamp", kTime}, {"tstz", "timestamptz", kTime}, {"ext", "uuid", kUUID},
		{"doc", "json", kJSON}, {"blob", "bytes", kBytes},
	}}
	big := make([]byte, 1<<20+12345)
	_, _ = rand.NewChaCha8([32]byte{42}).Read(big)
	utc := func(s string) time.Time {
		tm, err := time.Parse("2006-01-02 15:04:05.999999", s)
		if err != nil {
			panic(err)
		}
		return tm
	}
	day := func(s string) time.Time { return utc(s + " 00:00:00") }
	tb.rows = [][]any{
		{int64(1), "plain", "a note", "1.500", int32(0), int64(0), 1.5, true, day("2024-02-29"),
			utc("2024-02-29 23:59:59.999999"), utc("2024-02-29 23:59:59.999999"), "0b9e5a4c-5f3e-4b8e-9a77-1d2e3f405162",
			`{"b": [1, 2, {"c": "ü😀"}], "a": null, "n": 12345678901234, "t": true}`, []byte{0x00, 0xff, 0x10}},
		{int64(2), "", "", "0.000", int32(math.MinInt32), int64(math.MinInt64), -1.7976931348623157e308, false, day("1000-01-01"),
			utc("1000-01-01 00:00:00.000001"), utc("1970-01-01 00:00:01.000001"), "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
			`[]`, []byte{}},
		{int64(3), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
		{int64(4), "emoji 😀 and 中文 日本語 한국어", "😀😀😀 " + strings.Repeat("長い文字列 ", 20000), "999999999.999", int32(math.MaxInt32), int64(math.MaxInt64),
			2.2250738585072014e-308, true, day("9999-12-31"), utc("9999-12-31 23:59:59.999999"), utc("2038-01-19 03:14:07.999999"),
			"ffffffff-ffff-ffff-ffff-ffffffffffff", `{"z": {"y": [1, "two", false]}, "a": "quote \" backslash \\ tab \t"}`, big},
		{int64(math.MaxInt64), "quote ' backslash \\ tab \t newline \n end", " leading and trailing ", "-999999999.999", int32(-1), int64(-1),
			0.1, false, day("2000-01-01"), utc("2000-01-01 12:00:00"), utc("2000-01-01 12:00:00"), "00000000-0000-0000-0000-000000000000",
			`"just a string"`, []byte("\\x00 not hex")},
		{int64(math.MinInt64), "min key", "null literal in JSON", "0.001", int32(1), int64(1), 3.141592653589793, true, day("1999-12-31"),
			utc("1999-12-31 23:59:59.5"), utc("2001-09-09 01:46:40.123456"), "12345678-90ab-cdef-1234-567890abcdef",
			`null`, []byte{0}},
	}
	for i := range 300 {
		id := int64(1000 + i*7)
		var doc any
		if i%4 != 0 {
			doc = fmt.Sprintf(`{"i": %d, "tags": ["t%d", "ü"], "nested": {"k": %d}}`, i, i%5, i*i)
		}
		tb.rows = append(tb.rows, []any{id, fmt.Sprintf("order %d 😀", i), fmt.Sprintf("note %d %s", i, strings.Repeat("ß", i%50)),
			fmt.Sprintf("%d.%03d", i*37%100000, i%1000), int32(i * 7919), int64(i) * 1_000_000_007, float64(i) / 3, i%2 == 0,
			day("2020-01-01").AddDate(0, 0, i), utc("2020-01-01 00:00:00").Add(time.Duration(i) * (time.Hour + time.Microsecond)),
			utc("2021-06-01 00:00:00").Add(time.Duration(i) * 1234567 * time.Microsecond),
			fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*31), doc, []byte(fmt.Sprintf("blob %d", i))})
	}
	return tb
}

// wantOrderTypes are the target column types of ordersTable per direction
// (the mapping); "a|b" accepts either (MariaDB reports JSON as
// longtext).
var wantOrderTypes = map[string]string{
	"postgres>postgres": "id bigint, name character varying(64), note text, amount numeric(12,3), i32 integer, i64 bigint, ratio double precision, paid boolean, day date, ts timestamp without time zone, tstz timestamp with time zone, ext uuid, doc jsonb, blob bytea, _fence bigint",
	"postgres>mysql":    "id bigint, name varchar(64), note longtext, amount decimal(12,3), i32 int, i64 bigint, ratio double, paid tinyint(1), day date, ts datetime(6), tstz datetime(6), ext char(36), doc json|longtext, blob longblob, _fence bigint",
	"mysql>postgres":    "id bigint, name character varying(64), note text, amount numeric(12,3), i32 integer, i64 bigint, ratio double precision, paid boolean, day date, ts timestamp(6) without time zone, tstz timestamp(6) with time zone, ext character(36), doc jsonb, blob bytea, _fence bigint",
	"mysql>mysql":       "id bigint, name varchar(64), note longtext, amount decimal(12,3), i32 int, i64 bigint, ratio double, paid tinyint(1), day date, ts datetime(6), tstz timestamp(6), ext char(36), doc json|longtext, blob longblob, _fence bigint",
}

// intWidth is MariaDB's display width, which MySQL 8 no longer shows.
var intWidth = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|bigint|year)\(\d+\)`)

func dropWidth(typ string) string {
	if strings.HasPrefix(typ, "tinyint(1)") {
		return typ
	}
	return intWidth.ReplaceAllString(typ, "$1")
}

// targetTypes lists "column type" of a target table in column order.
func (e *env) targetTypes(t *testing.T, name string) []string {
	t.Helper()
	q := `SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`
	if e.dst == mysqlEngine {
		q = `SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`
	}
	rows, err := e.dstDB.QueryContext(t.Context(), q, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c, typ string
		if err := rows.Scan(&c, &typ); err != nil {
			t.Fatal(err)
		}
		out = append(out, c+" "+dropWidth(strings.ToLower(typ)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) assertTypes(t *testing.T, name, want string) {
	t.Helper()
	got := e.targetTypes(t, name)
	wants := strings.Split(want, ", ")
	ok := len(got) == len(wants)
	for i := 0; ok && i < len(got); i++ {
		c, alts, _ := strings.Cut(wants[i], " ")
		ok = false
		for _, a := range strings.Split(alts, "|") {
			ok = ok || got[i] == c+" "+a
		}
	}
	if !ok {
		t.Errorf("target %s columns (%s→%s)\n got %s\nwant %s", name, e.src.name, e.dst.name, strings.Join(got, ", "), want)
	}
}

func confFullCopy(t *testing.T, e *env) {
	tb := ordersTable()
	tb.create(t, e.src, e.srcDB)
	r := runMigrate(t, "run", "-p", e.plan(t, planTable{name: tb.name, key: tb.key}), "--json")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	if rep.RowsWritten != int64(len(tb.rows)) || rep.Verify == nil || !rep.Verify.Equal {
		t.Errorf("rows_written %d verify %+v, want %d and equal", rep.RowsWritten, rep.Verify, len(tb.rows))
	}
	e.assertTypes(t, tb.name, wantOrderTypes[e.src.name+">"+e.dst.name])
	assertSameDump(t, e, tb, len(tb.rows))
}

// confTypeMapping copies a column of every type the issue maps, one row of
// values and one of NULLs, and checks the target's column types.
func confTypeMapping(t *testing.T, e *env) {
	list := pgMapped
	if e.src == mysqlEngine {
		list = myMapped
	} else {
		exec1(t, e.srcDB, `CREATE TYPE conf_mood AS ENUM ('sad', 'happy')`)
	}
	tb := &table{name: "types_map", key: []string{"id"}, cols: []col{{"id", "bigint", kNum}}}
	want, vals := []string{"id bigint"}, []any{int64(1)}
	for i, m := range list {
		w := m.pg
		if e.dst == mysqlEngine {
			w = m.my
		}
		if w == "" {
			continue
		}
		name := fmt.Sprintf("c%02d", i)
		tb.cols = append(tb.cols, col{name, "=" + m.ddl, m.kind})
		want, vals = append(want, name+" "+w), append(vals, m.val)
	}
	nulls := make([]any, len(vals))
	nulls[0] = int64(2)
	tb.rows = [][]any{vals, nulls}
	tb.create(t, e.src, e.srcDB)
	wantCode(t, runMigrate(t, "run", "-p", e.plan(t, planTable{name: tb.name, key: tb.key})), 0)
	e.assertTypes(t, tb.name, strings.Join(append(want, "_fence bigint"), ", "))
	assertSameDump(t, e, tb, 2)
}

// bigTable is a narrow table of n rows for long runs.
func bigTable(n int) *table {
	tb := &table{name: "big", key: []string{"id"}, cols: []col{{"id", "bigint", kNum}, {"payload", "text", kText}, {"n", "integer", kNum}}}
	tb.rows = make([][]any, n)
	for i := range n {
		tb.rows[i] = []any{int64(i + 1), fmt.Sprintf("row %d %s😀", i+1, strings.Repeat("x", i%60)), int32(i % 1000)}
	}
	return tb
}

func confKillResume(t *testing.T, e *env) {
	const n = 60000
	e.leaseTTL, e.batchSize = "2s", 1000
	tb := bigTable(n)
	tb.create(t, e.src, e.srcDB)
	// The copy waits at the first row of the batch past n/2: the kill finds
	// it mid-run, however fast it copies.
	g := e.gateTable(t, tb, fmt.Sprintf("NEW.id > %d", n/2))
	plan := e.plan(t, planTable{name: tb.name, key: tb.key})

	first := startMigrate(t, "run", "-p", plan, "--json", "--instance", "victim")
	g.waitHeld(t, first, 1)
	if k := first.kill(t); k.code != -1 {
		t.Fatalf("the first run was not killed by the signal: %s", k)
	}
	g.drop(t) // its batch at the gate ends with its connection, as a killed client's does
	g.openAll(t)
	before, _ := e.checkpointOf(t, tb.name, 0)
	tokBefore, ownerBefore := e.fence(t, tb.name, 0)
	t.Logf("killed at the gate (checkpoint %+v, token %d)", before, tokBefore)
	if before.rowsDone != n/2 || before.state != "running" {
		t.Fatalf("checkpoint %+v at the kill, want running with the %d rows before the gate", before, n/2)
	}

	r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "survivor")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	if len(rep.Takeovers) != 1 {
		t.Fatalf("takeovers %+v, want exactly one\n%s", rep.Takeovers, r)
	}
	to := rep.Takeovers[0]
	if to.PreviousOwner != ownerBefore || to.Token <= tokBefore || to.ReplayedRows > int64(e.batchSize) {
		t.Errorf("takeover %+v, want from %q with a token above %d and at most %d rows replayed", to, ownerBefore, tokBefore, e.batchSize)
	}
	if rep.RowsWritten != n-before.rowsDone {
		t.Errorf("second run wrote %d rows, want the %d left after the checkpoint", rep.RowsWritten, n-before.rowsDone)
	}
	assertSameDump(t, e, tb, n)
}

func confStaleToken(t *testing.T, e *env) {
	const n = 60000
	e.batchSize = 500
	tb := bigTable(n)
	tb.create(t, e.src, e.srcDB)
	// The holder waits at the first row of the batch past n/2, its batch's
	// fence check done (the watermark row locked): the raise comes while it
	// copies, however fast it copies.
	g := e.gateTable(t, tb, fmt.Sprintf("NEW.id > %d", n/2))
	p := startMigrate(t, "run", "-p", e.plan(t, planTable{name: tb.name, key: tb.key}), "--json", "--instance", "holder")
	g.waitHeld(t, p, 1)
	tok, _ := e.fence(t, tb.name, 0)

	// The raise waits for the holder's batch in flight (it holds the
	// watermark row); the locking read then sees every batch committed
	// before the raise, and none can commit after it until we do.
	doneAtRaise := g.raise(t, e.name, tb.name)
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
	cp, _ := e.checkpointOf(t, tb.name, 0)
	if cp.rowsDone != doneAtRaise || cp.state == "done" || cp.token != tok {
		t.Errorf("checkpoint %+v after the refusal, want %d rows by token %d, not done", cp, doneAtRaise, tok)
	}
	if got := queryInt(t, e.dstDB, `SELECT count(*) FROM big`); got != doneAtRaise {
		t.Errorf("target holds %d rows, want the %d committed before the raise", got, doneAtRaise)
	}
	if got := queryInt(t, e.dstDB, `SELECT count(*) FROM big WHERE _fence <> `+e.dst.ph(1), tok); got != 0 {
		t.Errorf("%d target rows carry a token other than the holder's %d", got, tok)
	}
	if w, owner := e.fence(t, tb.name, 0); w != tok+1000 || owner != "intruder" {
		t.Errorf("watermark %d of %q, want %d of intruder", w, owner, tok+1000)
	}
}

// confLowerToken: a row another writer wrote with a newer token during the
// run is never overwritten; the batch rolls back and the shard halts.
func confLowerToken(t *testing.T, e *env) {
	const n = 3000
	e.maxRetries = 1
	src := &table{name: "acct", key: []string{"id"}, cols: []col{
		{"id", "bigint", kNum},
		{"name", "varchar", kText},
		{"n", "integer", kNum},
	}}
	for i := range n {
		src.rows = append(src.rows, []any{int64(i + 1), fmt.Sprintf("acct %d", i+1), int32(i)})
	}
	src.create(t, e.src, e.srcDB)
	dst := &table{name: "acct", key: src.key, cols: append(src.cols[:3:3],
		col{"_fence", "=bigint NOT NULL DEFAULT 0", kNum})}
	dst.create(t, e.dst, e.dstDB)
	// A newer writer's row lands mid-run, after setup (a new plan starts
	// above the tokens already in the table): it is held uncommitted until
	// the run's second batch waits on it.
	newer := []any{int64(1500), "written by a newer holder", int32(-1), int64(1000000)}
	conn, err := e.dstDB.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	insertRows(t, e.dst, tx, "acct", dst.colNames(), [][]any{newer})

	p := startMigrate(t, "run", "-p", e.plan(t, planTable{name: src.name, key: src.key}), "--json")
	waitBlocked(t, e, p, "acct")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	wantCode(t, r, 5)
	var name string
	var v, tok int64
	q := fmt.Sprintf("SELECT %s, %s, %s FROM %s WHERE %s = 1500", e.dst.quote("name"), e.dst.quote("n"), e.dst.quote("_fence"), e.dst.quote("acct"), e.dst.quote("id"))
	if err := e.dstDB.QueryRowContext(t.Context(), q).Scan(&name, &v, &tok); err != nil || name != newer[1] || v != -1 || tok != 1000000 {
		t.Errorf("row 1500 after the run: %q %d token %d (%v), want unchanged %v\n%s", name, v, tok, err, newer, r)
	}
	if cp, _ := e.checkpointOf(t, "acct", 0); cp.state != "halted" {
		t.Errorf("checkpoint %+v, want halted", cp)
	}
}

// keyValues are distinct under binary comparison only: case, trailing
// spaces, accents, 4-byte UTF-8, the empty string.
var keyValues = []string{"a", "A", "b", "B", "a ", "a  ", "ä", "Ä", "z😀", "Z", "", " a"}

func confKeys(t *testing.T, e *env) {
	e.batchSize = 7 // pages end inside runs of equal first key parts
	skeys := &table{name: "skeys", key: []string{"k"}, cols: []col{{"k", "keytext", kText}, {"v", "integer", kNum}}}
	for i, k := range keyValues {
		skeys.rows = append(skeys.rows, []any{k, int32(i)})
	}
	tables := []*table{skeys}
	plan := []planTable{{name: "skeys", key: skeys.key}}
	// (integer, varchar) as in the issue; (bigint, text): a text key part
	// next to another key part.
	for _, c := range [][3]string{{"ckeys", "integer", "keyvarchar"}, {"tkeys", "bigint", "keytext"}} {
		tb := &table{name: c[0], key: []string{"a", "b"}, cols: []col{{"a", c[1], kNum}, {"b", c[2], kText}, {"note", "varchar", kText}}}
		for a := range 5 {
			for _, b := range keyValues {
				tb.rows = append(tb.rows, []any{int32(a), b, fmt.Sprintf("%d/%q", a, b)})
			}
		}
		tables, plan = append(tables, tb), append(plan, planTable{name: tb.name, key: tb.key})
	}
	for _, tb := range tables {
		tb.create(t, e.src, e.srcDB)
	}
	r := runMigrate(t, "run", "-p", e.plan(t, plan...), "--json")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	if rep.Verify == nil || !rep.Verify.Equal {
		t.Errorf("verify %+v, want equal", rep.Verify)
	}
	for _, tb := range tables {
		assertSameDump(t, e, tb, len(tb.rows))
	}
	e.assertTypes(t, "skeys", map[string]string{"postgres>postgres": "k text", "postgres>mysql": "k varchar(768)",
		"mysql>postgres": "k character varying(32)", "mysql>mysql": "k varchar(32)"}[e.src.name+">"+e.dst.name]+", v "+
		map[string]string{"postgres": "integer", "mysql": "int"}[e.dst.name]+", _fence bigint")
	if e.dst == mysqlEngine {
		for _, tc := range [][2]string{{"skeys", "k"}, {"ckeys", "b"}, {"tkeys", "b"}} {
			var coll string
			if err := e.dstDB.QueryRowContext(t.Context(), `SELECT COLLATION_NAME FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?`, tc[0], tc[1]).Scan(&coll); err != nil {
				t.Fatal(err)
			}
			if coll != "utf8mb4_nopad_bin" && coll != "utf8mb4_0900_bin" {
				t.Errorf("target %s.%s has collation %s, want a binary NO PAD one", tc[0], tc[1], coll)
			}
		}
	}
}

// edgeRun runs a plan of one table whose values the target cannot hold: it
// must halt (exit 5) naming the table and column, never write a changed
// value.
func edgeRun(t *testing.T, e *env, tb *table, column string) {
	t.Helper()
	e.maxRetries = 1
	r := runMigrate(t, "run", "-p", e.plan(t, planTable{name: tb.name, key: tb.key}))
	wantCode(t, r, 5)
	if !strings.Contains(r.stderr, tb.name) || !strings.Contains(r.stderr, column) {
		t.Errorf("stderr does not name %s.%s:\n%s", tb.name, column, r)
	}
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, column) && !strings.Contains(l, "level=INFO") {
			t.Logf("%s.%s refused: %s", tb.name, column, l)
			break
		}
	}
	// Whatever reached the target is the source's row, unchanged.
	schema := map[string]string{"postgres": "current_schema()", "mysql": "DATABASE()"}[e.dst.name]
	if queryInt(t, e.dstDB, "SELECT count(*) FROM information_schema.tables WHERE table_schema = "+schema+" AND table_name = "+e.dst.ph(1), tb.name) == 0 {
		return
	}
	src := map[string]string{}
	for _, row := range dump(t, e.src, e.srcDB, tb.name, tb.cols, tb.key) {
		src[row.key] = strings.Join(row.vals, ", ")
	}
	for _, row := range dump(t, e.dst, e.dstDB, tb.name, tb.cols, tb.key) {
		if got := strings.Join(row.vals, ", "); got != src[row.key] {
			t.Errorf("%s: target row %s, source row %s", tb.name, got, src[row.key])
		}
	}
}

func confNaN(t *testing.T, e *env) {
	dbl := "double"
	id := "bigint"
	nan := &table{name: "edge_nan", key: []string{"id"}, cols: []col{{"id", id, kNum}, {"ratio", dbl, kFloat}},
		rows: [][]any{{int64(1), 1.5}, {int64(2), math.NaN()}, {int64(3), 2.5}}}
	inf := &table{name: "edge_inf", key: []string{"id"}, cols: []col{{"id", id, kNum}, {"peak", dbl, kFloat}},
		rows: [][]any{{int64(1), math.Inf(1)}, {int64(2), math.Inf(-1)}}}
	nan.create(t, e.src, e.srcDB)
	inf.create(t, e.src, e.srcDB)
	if e.dst == pgEngine {
		wantCode(t, runMigrate(t, "run", "-p", e.plan(t, planTable{name: nan.name, key: nan.key}, planTable{name: inf.name, key: inf.key})), 0)
		assertSameDump(t, e, nan, 3)
		assertSameDump(t, e, inf, 2)
		return
	}
	edgeRun(t, e, nan, "ratio")
	edgeRun(t, e, inf, "peak")
}

func confZeroDates(t *testing.T, e *env) {
	id := "bigint"
	zd := &table{name: "edge_zd", key: []string{"id"}, cols: []col{{"id", id, kNum}, {"born", "zerodate", kDate}},
		rows: [][]any{{int64(1), "2020-01-02"}, {int64(2), "0000-00-00"}}}
	zdt := &table{name: "edge_zdt", key: []string{"id"}, cols: []col{{"id", id, kNum}, {"seen_at", "zerodatetime", kTime}},
		rows: [][]any{{int64(1), "2020-01-02 03:04:05"}, {int64(2), "0000-00-00 00:00:00"}}}
	conn, err := e.srcDB.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	exec1c := func(q string) {
		if _, err := conn.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec1c("SET SESSION sql_mode = ''") // zero dates allowed
	for _, tb := range []*table{zd, zdt} {
		exec1c(fmt.Sprintf("CREATE TABLE %s (id bigint NOT NULL PRIMARY KEY, %s %s)", tb.name, tb.cols[1].name, tb.cols[1].ddl(e.src)))
		insertRows(t, e.src, conn, tb.name, tb.colNames(), tb.rows)
	}
	_ = conn.Close()
	for _, tb := range []*table{zd, zdt} {
		if e.dst == pgEngine {
			edgeRun(t, e, tb, tb.cols[1].name)
			continue
		}
		// MySQL to MySQL may keep a zero date as it is, or refuse it
		// clearly; it must never change it silently.
		e.maxRetries = 1
		r := runMigrate(t, "run", "-p", e.plan(t, planTable{name: tb.name, key: tb.key}))
		t.Logf("%s: exit %d", tb.name, r.code)
		if r.code == 0 {
			assertSameDump(t, e, tb, 2) // cannot tell 0000-00-00 from 0001-01-01: both read as time.Time{}
			q := fmt.Sprintf("SELECT count(*) FROM %s WHERE CAST(%s AS CHAR) LIKE '0000-00-00%%'", tb.name, tb.cols[1].name)
			if n := queryInt(t, e.dstDB, q); n != 1 {
				t.Errorf("%s: %d zero dates in the target, want 1", tb.name, n)
			}
		} else if !strings.Contains(r.stderr, tb.cols[1].name) {
			t.Errorf("zero date refused without naming %s.%s:\n%s", tb.name, tb.cols[1].name, r)
		}
	}
}

func confNumeric(t *testing.T, e *env) {
	tb := &table{name: "edge_num", key: []string{"id"}, cols: []col{
		{"id", "bigint", kNum},
		{"price", "numeric", kNum}},
		rows: [][]any{{int64(1), "12345678901234567890.123456789"}, {int64(2), "0.1"}, {int64(3), "-3"}, {int64(4), nil}, {int64(5), "0.0000000001"}}}
	tb.create(t, e.src, e.srcDB)
	if e.dst == pgEngine {
		wantCode(t, runMigrate(t, "run", "-p", e.plan(t, planTable{name: tb.name, key: tb.key})), 0)
		assertSameDump(t, e, tb, len(tb.rows))
		return
	}
	r := runMigrate(t, "run", "-p", e.plan(t, planTable{name: tb.name, key: tb.key}))
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "edge_num.price") || !strings.Contains(r.stderr, "numeric") {
		t.Errorf("stderr does not name edge_num.price and its type numeric:\n%s", r)
	}
	r = runMigrate(t, "run", "-p", e.plan(t, planTable{name: tb.name, key: tb.key, types: map[string]string{"price": "decimal(30,10)"}}))
	wantCode(t, r, 0)
	e.assertTypes(t, tb.name, "id bigint, price decimal(30,10), _fence bigint")
	tb.cols[1].kind = kNumNorm // the scale is the plan's now
	assertSameDump(t, e, tb, len(tb.rows))
}

// confFloat copies single-precision floats (PostgreSQL real, MySQL FLOAT)
// that six significant digits would round — MariaDB sends FLOAT so by the
// text protocol — on the first page (no bind parameters) and on later ones,
// then again through MySQL DSNs with interpolateParams=true (every
// statement by the text protocol), and repairs rows through those.
func confFloat(t *testing.T, e *env) {
	// 7.038531e-26 is the shortest text of a float32 that MySQL, which
	// parses text as a double first, reads as its neighbour 7.0385313e-26
	// (LOAD DATA is text).
	vals := []float32{1.2345678, 16777216, 3.14159265, -0.000123456789, 7.038531e-26, 0.1, 1.17549435e-38, 1.4e-45, -16777215, 3.4028235e38}
	e.batchSize = 5 // the first page holds the first five values, later pages all of them again
	for _, interp := range []bool{false, true} {
		tb := &table{name: "floats", key: []string{"id"}, cols: []col{{"id", "bigint", kNum}, {"x", "float", kFloat32}}}
		for i := range 2 * len(vals) {
			tb.rows = append(tb.rows, []any{int64(i + 1), vals[i%len(vals)]})
		}
		tb.rows = append(tb.rows, []any{int64(len(tb.rows) + 1), nil})
		if interp {
			if e.src != mysqlEngine && e.dst != mysqlEngine {
				continue
			}
			tb.name, e.name = "floats_ip", e.name+"_ip"
			for _, u := range []*string{&e.srcURL, &e.dstURL} {
				if strings.HasPrefix(*u, "mysql://") {
					*u += "?interpolateParams=true"
				}
			}
		}
		tb.create(t, e.src, e.srcDB)
		plan := e.plan(t, planTable{name: tb.name, key: tb.key})
		r := runMigrate(t, "run", "-p", plan)
		assertSameDump(t, e, tb, len(tb.rows)) // first: it names a rounded value
		wantCode(t, r, 0)
		if !interp {
			continue
		}
		q := e.dst.quote
		tamper(t, e, 2, fmt.Sprintf("UPDATE %s SET %s = 0 WHERE %s IN (1, %d)", q(tb.name), q("x"), q("id"), len(vals)+3))
		wantCode(t, runMigrate(t, "repair", "-p", plan), 0)
		assertSameDump(t, e, tb, len(tb.rows))
	}
}

// confEnumCase copies MySQL ENUM and SET columns whose members are in
// mixed case (the sakila film table's rating and special_features), some
// differing only by case (a case-sensitive collation allows that): the
// target's types keep the members as the source spells them.
func confEnumCase(t *testing.T, e *env) {
	const bin = " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
	tb := &table{name: "film", key: []string{"film_id"}, cols: []col{
		{"film_id", "bigint", kNum},
		{"rating", "=ENUM('G','PG','PG-13','R','NC-17') DEFAULT 'G'", kText},
		{"special_features", "=SET('Trailers','Commentaries','Deleted Scenes','Behind the Scenes')", kText},
		{"grade", "=ENUM('a','A','b','B')" + bin, kText},
		{"tags", "=SET('x','X','Yy')" + bin, kText},
	}, rows: [][]any{
		{int64(1), "PG-13", "Trailers,Deleted Scenes", "A", "x,X"},
		{int64(2), "NC-17", "Behind the Scenes", "a", "X"},
		{int64(3), "G", "", "B", "Yy"},
		{int64(4), "R", "Trailers,Commentaries,Deleted Scenes,Behind the Scenes", "b", "x,X,Yy"},
		{int64(5), nil, nil, nil, nil},
	}}
	tb.create(t, e.src, e.srcDB)
	r := runMigrate(t, "run", "-p", e.plan(t, planTable{name: tb.name, key: tb.key}))
	wantCode(t, r, 0)
	assertSameDump(t, e, tb, len(tb.rows))
	if e.dst != mysqlEngine {
		e.assertTypes(t, tb.name, "film_id bigint, rating text, special_features text, grade text, tags text, _fence bigint")
		return
	}
	q := `SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND DATA_TYPE IN ('enum', 'set') ORDER BY ORDINAL_POSITION`
	types := func(db *sql.DB) string { return strings.Join(queryStrings(t, db, q, tb.name), ", ") }
	if src, dst := types(e.srcDB), types(e.dstDB); src != dst {
		t.Errorf("target ENUM and SET columns\n got %s\nwant %s", dst, src)
	}
}
