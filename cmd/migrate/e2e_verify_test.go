package main_test

// TestVerify drives `migrate verify` (and the check that ends `migrate run`)
// in the four engine directions of the conformance suite: a clean copy of
// the edge-value orders table must verify equal, and a target tampered by
// SQL after a clean run must be reported row by row, exactly.

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var updateVerifyGolden = flag.Bool("update-verify", false, "rewrite the golden files under testdata/verify")

// verifyOut is `migrate verify --json` (SPEC §4).
type verifyOut struct {
	Equal  bool          `json:"equal"`
	Tables []verifyTable `json:"tables"`
}

type verifyTable struct {
	Table      string         `json:"table"`
	SourceRows int64          `json:"source_rows"`
	TargetRows int64          `json:"target_rows"`
	Missing    int64          `json:"missing"`
	Extra      int64          `json:"extra"`
	Changed    int64          `json:"changed"`
	Samples    []verifySample `json:"samples"`
	Method     string         `json:"method"`
}

type verifySample struct {
	Key     string   `json:"key"`
	Kind    string   `json:"kind"`
	Source  values   `json:"source"`
	Target  values   `json:"target"`
	Columns []string `json:"columns"`
}

// values are a sample row's canonical values; JSON null is SQL NULL.
type values map[string]*string

// val is one value as text, "NULL" for SQL NULL, "" for a missing column.
func (v values) val(col string) string {
	p, ok := v[col]
	switch {
	case !ok:
		return ""
	case p == nil:
		return "NULL"
	}
	return *p
}

func TestVerify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"equal_copy", verifyEqualCopy},
		{"tampered_target", verifyTampered},
	}
	for _, dir := range directions {
		t.Run(dir.String(), func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, newEnv(t, dir.src, dir.dst))
				})
			}
		})
	}
}

// runVerify runs `migrate verify` with args plus --json, wants exit code,
// checks the contract's keys and decodes the result.
func runVerify(t *testing.T, code int, args ...string) verifyOut {
	t.Helper()
	r := runMigrate(t, append(append([]string{"verify"}, args...), "--json")...)
	wantCode(t, r, code)
	var raw map[string]any
	decodeJSON(t, r, &raw)
	requireKeys(t, "verify --json", raw, "equal", "tables")
	for i, tb := range requireList(t, "verify --json", raw, "tables") {
		m := requireKeys(t, fmt.Sprintf("tables[%d]", i), tb, "table", "source_rows", "target_rows", "missing", "extra", "changed", "samples")
		for j, s := range requireList(t, "table", m, "samples") {
			requireKeys(t, fmt.Sprintf("tables[%d].samples[%d]", i, j), s, "key", "kind", "source", "target")
		}
	}
	var v verifyOut
	decodeJSON(t, r, &v)
	return v
}

// wantMethod checks that a pair on one engine was verified by chunk
// checksums, a pair across engines row by row.
func wantMethod(t *testing.T, e *env, got verifyTable) {
	t.Helper()
	want := "rows"
	if e.src == e.dst {
		want = "checksum"
	}
	if got.Method != want {
		t.Errorf("table %s verified by %q, want %q", got.Table, got.Method, want)
	}
}

func wantCounts(t *testing.T, got verifyTable, name string, src, dst, missing, extra, changed int64) {
	t.Helper()
	if got.Table != name || got.SourceRows != src || got.TargetRows != dst || got.Missing != missing || got.Extra != extra || got.Changed != changed {
		t.Errorf("table %s: source_rows %d target_rows %d missing %d extra %d changed %d, want %s: %d %d %d %d %d",
			got.Table, got.SourceRows, got.TargetRows, got.Missing, got.Extra, got.Changed, name, src, dst, missing, extra, changed)
	}
}

// runOrders seeds the orders table, copies it cleanly and returns the plan.
func runOrders(t *testing.T, e *env) (*table, string) {
	t.Helper()
	tb := ordersTable()
	tb.create(t, e.src, e.srcDB)
	plan := e.plan(t, planTable{name: tb.name, key: tb.key})
	r := runMigrate(t, "run", "-p", plan, "--json")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	n := int64(len(tb.rows))
	if rep.RowsWritten != n || rep.Verify == nil || !rep.Verify.Equal || len(rep.Verify.Tables) != 1 {
		t.Fatalf("run: rows_written %d verify %+v, want %d rows and one equal table", rep.RowsWritten, rep.Verify, n)
	}
	if v := rep.Verify.Tables[0]; v.SourceRows != n || v.TargetRows != n || v.Missing+v.Extra+v.Changed != 0 {
		t.Errorf("run's verification %+v, want %d rows on each side and no difference", v, n)
	}
	return tb, plan
}

func verifyEqualCopy(t *testing.T, e *env) {
	tb, plan := runOrders(t, e)
	n := int64(len(tb.rows))
	for _, args := range [][]string{{"-p", plan}, {"-p", plan, "--table", tb.name}} {
		v := runVerify(t, 0, args...)
		if !v.Equal || len(v.Tables) != 1 {
			t.Fatalf("verify %v: %+v, want equal, one table", args, v)
		}
		wantCounts(t, v.Tables[0], tb.name, n, n, 0, 0, 0)
		wantMethod(t, e, v.Tables[0])
		if len(v.Tables[0].Samples) != 0 {
			t.Errorf("verify %v: samples %+v, want none", args, v.Tables[0].Samples)
		}
	}
	r := runMigrate(t, "verify", "-p", plan)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "verification: equal") || strings.Contains(r.stdout, "DIFFERENT") ||
		!slices.Equal(tableLine(r.stdout, tb.name), []string{tb.name, fmt.Sprint(n), fmt.Sprint(n), "0", "0", "0", "equal"}) {
		t.Errorf("text output of an equal copy:\n%s", r.stdout)
	}
}

// tableLine returns the fields of the counts line of table name.
func tableLine(out, name string) []string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

// tamper runs one statement on the target that must change want rows.
func tamper(t *testing.T, e *env, want int64, q string, args ...any) {
	t.Helper()
	res, err := e.dstDB.ExecContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != want {
		t.Fatalf("%s: %d rows affected (%v), want %d", q, n, err, want)
	}
}

func verifyTampered(t *testing.T, e *env) {
	tb, plan := runOrders(t, e)
	n := int64(len(tb.rows))
	q, ph := e.dst.quote, e.dst.ph
	orders := q("orders")
	byID := map[int64][]any{}
	for _, row := range tb.rows {
		byID[row[0].(int64)] = row
	}
	const usec = "2006-01-02 15:04:05.000000"
	ts := byID[1021][9].(time.Time)
	tamper(t, e, 2, fmt.Sprintf("DELETE FROM %s WHERE %s IN (1000, 1007)", orders, q("id")))
	tamper(t, e, 1, fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s = 1014", orders, q("name"), ph(1), q("id")), "tampered")
	tamper(t, e, 1, fmt.Sprintf("UPDATE %s SET %s = '' WHERE %s = 3", orders, q("note"), q("id")))
	step := map[string]string{"postgres": "interval '1 microsecond'", "mysql": "INTERVAL 1 MICROSECOND"}[e.dst.name]
	tamper(t, e, 1, fmt.Sprintf("UPDATE %s SET %s = %s + %s WHERE %s = 1021", orders, q("ts"), q("ts"), step, q("id")))
	insertRows(t, e.dst, e.dstDB, "orders", []string{"id", "name"}, [][]any{{int64(5), "extra 5"}, {int64(6), "extra 6"}, {int64(7), "extra 7"}})

	v := runVerify(t, 3, "-p", plan)
	if v.Equal || len(v.Tables) != 1 {
		t.Fatalf("verify: %+v, want not equal, one table", v)
	}
	got := v.Tables[0]
	wantCounts(t, got, tb.name, n, n+1, 2, 3, 3)
	wantMethod(t, e, got)
	// Every difference, in key order, and for changed rows the one
	// differing column with its source and target values.
	want := []struct {
		kind, key, col, src, dst string
	}{
		{"changed", "3", "note", "NULL", ""},
		{"extra", "5", "", "", ""},
		{"extra", "6", "", "", ""},
		{"extra", "7", "", "", ""},
		{"missing", "1000", "", "", ""},
		{"missing", "1007", "", "", ""},
		{"changed", "1014", "name", byID[1014][1].(string), "tampered"},
		{"changed", "1021", "ts", ts.Format(usec), ts.Add(time.Microsecond).Format(usec)},
	}
	if len(got.Samples) != len(want) {
		t.Fatalf("%d samples, want %d: %+v", len(got.Samples), len(want), got.Samples)
	}
	for i, w := range want {
		s := got.Samples[i]
		if s.Kind != w.kind || s.Key != w.key {
			t.Errorf("sample %d: %s key %s, want %s key %s", i, s.Kind, s.Key, w.kind, w.key)
			continue
		}
		switch w.kind {
		case "changed":
			if !slices.Equal(s.Columns, []string{w.col}) || s.Source.val(w.col) != w.src || s.Target.val(w.col) != w.dst {
				t.Errorf("changed %s: columns %v, %s %q -> %q, want [%s] %q -> %q", w.key, s.Columns, w.col, s.Source.val(w.col), s.Target.val(w.col), w.col, w.src, w.dst)
			}
			if len(s.Source) != len(tb.cols) || len(s.Target) != len(tb.cols) || s.Source.val("id") != w.key || s.Target.val("id") != w.key {
				t.Errorf("changed %s: source %d values, target %d, want %d with id %s", w.key, len(s.Source), len(s.Target), len(tb.cols), w.key)
			}
		case "missing":
			if s.Target != nil || s.Source.val("id") != w.key || len(s.Columns) != 0 {
				t.Errorf("missing %s: source id %q, target %v, columns %v; want the source row only", w.key, s.Source.val("id"), s.Target, s.Columns)
			}
		case "extra":
			if s.Source != nil || s.Target.val("id") != w.key || s.Target.val("name") != "extra "+w.key || s.Target.val("note") != "NULL" || len(s.Columns) != 0 {
				t.Errorf("extra %s: source %v, target id %q name %q note %q, columns %v; want the target row only",
					w.key, s.Source, s.Target.val("id"), s.Target.val("name"), s.Target.val("note"), s.Columns)
			}
		}
	}
	// --table names the plan's table; an unknown one is a usage error.
	wantCounts(t, runVerify(t, 3, "-p", plan, "--table", tb.name).Tables[0], tb.name, n, n+1, 2, 3, 3)
	r := runMigrate(t, "verify", "-p", plan, "--table", "no_such_table", "--json")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "no_such_table") {
		t.Errorf("stderr does not name the unknown table:\n%s", r)
	}

	r = runMigrate(t, "verify", "-p", plan)
	wantCode(t, r, 3)
	header := strings.Fields(strings.SplitN(r.stdout, "\n", 2)[0])
	if !slices.Equal(header, strings.Fields("TABLE SOURCE ROWS TARGET ROWS MISSING EXTRA CHANGED RESULT")) ||
		!slices.Equal(tableLine(r.stdout, tb.name), []string{tb.name, fmt.Sprint(n), fmt.Sprint(n + 1), "2", "3", "3", "DIFFERENT"}) ||
		!strings.HasSuffix(r.stdout, "verification: DIFFERENT\n") || strings.Contains(r.stdout, "verification: equal") {
		t.Errorf("text output of a tampered copy:\n%s", r.stdout)
	}
	for _, w := range []string{fmt.Sprintf("orders changed key 1014  name: %q -> %q", byID[1014][1].(string), "tampered"), "orders missing key 1000", "orders extra key 7"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("text output lacks %q:\n%s", w, r.stdout)
		}
	}
}

// TestVerify_Golden pins the text and JSON output of a small tampered
// PostgreSQL table (go test -run TestVerify_Golden -update-verify rewrites
// the files).
func TestVerify_Golden(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgEngine, pgEngine)
	at := time.Date(2024, 2, 29, 23, 59, 59, 999999000, time.UTC)
	tb := &table{name: "gold", key: []string{"id"}, cols: []col{
		{"id", "bigint", kNum}, {"name", "varchar", kText}, {"amount", "decimal", kNum}, {"at", "timestamptz", kTime}, {"doc", "json", kJSON},
	}, rows: [][]any{
		{int64(1), "alpha", "1.500", at, `{"b": [1, 2], "a": null}`},
		{int64(2), "beta 😀", "-0.250", at.Add(-time.Hour), nil},
		{int64(3), nil, nil, nil, `{}`},
	}}
	tb.create(t, e.src, e.srcDB)
	plan := e.plan(t, planTable{name: tb.name, key: tb.key})
	wantCode(t, runMigrate(t, "run", "-p", plan), 0)
	exec1(t, e.dstDB, `DELETE FROM gold WHERE id = 1`)
	exec1(t, e.dstDB, `UPDATE gold SET name = 'BETA 😀', amount = -0.251 WHERE id = 2`)
	exec1(t, e.dstDB, `UPDATE gold SET name = '' WHERE id = 3`)
	exec1(t, e.dstDB, `INSERT INTO gold (id, name, amount, at, doc) VALUES (4, 'extra', 4.000, '2024-03-01 00:00:00.000001+00', '{"z": 1, "a": 2}')`)

	text := runMigrate(t, "verify", "-p", plan)
	wantCode(t, text, 3)
	js := runMigrate(t, "verify", "-p", plan, "--json")
	wantCode(t, js, 3)
	mdPath := filepath.Join(t.TempDir(), "report.md")
	wantCode(t, runMigrate(t, "verify", "-p", plan, "--report", mdPath), 3)
	md, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	// The plan name is unique per run: the golden file has a placeholder.
	mdText := strings.ReplaceAll(string(md), e.name, "PLAN")
	if !json.Valid([]byte(js.stdout)) {
		t.Fatalf("verify --json output is not JSON:\n%s", js)
	}
	for _, g := range []struct{ file, got string }{{"tampered.txt", text.stdout}, {"tampered.json", js.stdout}, {"tampered.md", mdText}} {
		path := filepath.Join("testdata", "verify", g.file)
		if *updateVerifyGolden {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(g.got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update-verify to create it)", err)
		}
		if g.got != string(want) {
			t.Errorf("%s differs from the output (rerun with -update-verify if intended)\n--- got\n%s--- want\n%s", path, g.got, want)
		}
	}
	if got := tableLine(text.stdout, "gold"); !slices.Equal(got, []string{"gold", "3", "3", "1", "1", "2", "DIFFERENT"}) {
		t.Errorf("counts line %q, want 3 3 1 1 2 DIFFERENT", got)
	}
}
