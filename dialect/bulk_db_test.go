package dialect_test

import (
	"database/sql"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
)

// InsertNew writes every value as the upsert would, refuses a row that
// exists (ErrConflict) and a value it cannot write (ErrNotBulk), each time
// leaving nothing behind once the transaction is rolled back.
func TestPostgres_InsertNew(t *testing.T) {
	db := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id bigint PRIMARY KEY, s text, b bytea, j jsonb, f float8, r real, n numeric,
  ts timestamp, tz timestamptz, d date, ok boolean, _fence bigint NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	cols := tableColumns(t, db, dialect.Postgres{}, "t")
	at := time.Date(2024, 2, 29, 23, 59, 59, 999999000, time.FixedZone("X", 5*3600+1800))
	rows := [][]any{
		{int64(1), "tab\there\nnew line\r\\back\\N", []byte{0, '\\', '\t', 0xff}, []byte(`{"a": "x\ty"}`), math.Inf(-1), float32(1.0000001), "1.500",
			at, at, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), true},
		{int64(2), "", []byte{}, `[]`, math.NaN(), float32(math.Inf(1)), "NaN", nil, nil, nil, false},
		{int64(3), nil, nil, nil, math.Copysign(0, -1), nil, nil, nil, nil, nil, nil},
		{int64(4), `\N`, nil, nil, 0.1, nil, "-0.000", nil, nil, nil, nil},
	}
	write := func(rows [][]any) error {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = dialect.InsertNew(ctx, dialect.Postgres{}, conn, []string{"t"}, cols, "_fence", 7, rows)
		if err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	if err := write(rows); err != nil {
		t.Fatal(err)
	}
	type got struct {
		s, j, ts, tz, d, n sql.NullString
		b                  []byte
		f                  float64
		r                  sql.NullFloat64
		ok                 sql.NullBool
		fence              int64
		fneg               bool
	}
	read := func(id int) got {
		var g got
		if err := db.QueryRowContext(ctx, `SELECT s, j::text, ts::text, (tz AT TIME ZONE 'UTC')::text, d::text, n::text, b, f, r, ok, _fence, f::text = '-0'
  FROM t WHERE id = $1`, id).Scan(&g.s, &g.j, &g.ts, &g.tz, &g.d, &g.n, &g.b, &g.f, &g.r, &g.ok, &g.fence, &g.fneg); err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := read(1)
	if g.s.String != "tab\there\nnew line\r\\back\\N" || string(g.b) != "\x00\\\t\xff" || g.j.String != `{"a": "x\ty"}` ||
		!math.IsInf(g.f, -1) || g.r.Float64 != float64(float32(1.0000001)) || g.n.String != "1.500" ||
		g.ts.String != "2024-02-29 23:59:59.999999" || g.tz.String != "2024-02-29 18:29:59.999999" || g.d.String != "2024-02-29" ||
		!g.ok.Bool || g.fence != 7 {
		t.Errorf("row 1 read back as %+v", g)
	}
	if g := read(2); g.s.String != "" || !g.s.Valid || g.b == nil || len(g.b) != 0 || !math.IsNaN(g.f) || !math.IsInf(g.r.Float64, 1) || g.n.String != "NaN" || g.ok.Bool {
		t.Errorf("row 2 (empty values) read back as %+v", g)
	}
	if g := read(3); g.s.Valid || g.b != nil || g.j.Valid || !g.fneg || g.ok.Valid {
		t.Errorf("row 3 (NULLs, -0) read back as %+v", g)
	}
	if g := read(4); g.s.String != `\N` || g.f != 0.1 || g.n.String != "0.000" {
		t.Errorf(`row 4 (the text \N, 0.1) read back as %+v`, g)
	}
	blank := func(id int64, v any) []any { return []any{id, v, nil, nil, nil, nil, nil, nil, nil, nil, nil} }
	if err := write([][]any{blank(5, nil), blank(1, nil)}); !errors.Is(err, dialect.ErrConflict) {
		t.Errorf("an existing key: %v, want ErrConflict", err)
	}
	if err := write([][]any{blank(6, struct{}{})}); !errors.Is(err, dialect.ErrNotBulk) {
		t.Errorf("a value of an unknown type: %v, want ErrNotBulk", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 4 {
		t.Errorf("%d rows, %v; want the 4 first ones only", n, err)
	}
}

// The same on MySQL, where LOAD DATA LOCAL would skip a duplicate or
// coerce a bad value with a mere warning.
func TestMySQL_InsertNew(t *testing.T) {
	db, d := openMySQL(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id bigint PRIMARY KEY, s text, v varchar(3), b blob, j json, f double, r float,"+
		" n decimal(12,3), ts datetime(6), d date, ok tinyint(1), _fence bigint NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	cols := tableColumns(t, db, d, "t")
	at := time.Date(2024, 2, 29, 23, 59, 59, 999999000, time.FixedZone("X", 5*3600+1800))
	row := func(id int64, s, v, b, j, f, r, n, ts, dt, ok any) []any {
		return []any{id, s, v, b, j, f, r, n, ts, dt, ok}
	}
	write := func(rows ...[]any) error {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := dialect.InsertNew(ctx, d.(dialect.BulkInserter), conn, []string{"t"}, cols, "_fence", 7, rows); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	if err := write(
		row(1, "tab\there\nnew line\r\\back\\N\x00end", "abc", []byte{0, '\\', '\t', '\n', 0xff}, `{"a": "x\ty"}`, 0.1, float32(1.0000001), "1.500", at,
			time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), true),
		row(2, "", "", []byte{}, "[]", -1.7976931348623157e308, float32(0), "-0.001", nil, nil, false),
		row(3, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil),
		row(4, `\N`, `\N`, nil, nil, nil, nil, nil, nil, nil, nil),
	); err != nil {
		t.Fatal(err)
	}
	var s, v, j, n, ts, dt sql.NullString
	var b []byte
	var f, r sql.NullFloat64
	var ok sql.NullInt64
	var fence int64
	read := func(id int) {
		t.Helper()
		if err := db.QueryRowContext(ctx, "SELECT s, v, b, j, f, r, n, CAST(ts AS CHAR), CAST(d AS CHAR), ok, _fence FROM t WHERE id = ?", id).
			Scan(&s, &v, &b, &j, &f, &r, &n, &ts, &dt, &ok, &fence); err != nil {
			t.Fatal(err)
		}
	}
	read(1)
	if s.String != "tab\there\nnew line\r\\back\\N\x00end" || v.String != "abc" || string(b) != "\x00\\\t\n\xff" || j.String != `{"a": "x\ty"}` ||
		f.Float64 != 0.1 || float32(r.Float64) != float32(1.0000001) || n.String != "1.500" || ts.String != "2024-02-29 18:29:59.999999" ||
		dt.String != "2024-02-29" || ok.Int64 != 1 || fence != 7 {
		t.Errorf("row 1 read back as %q %q %q %q %v %v %q %q %q %v %d", s.String, v.String, b, j.String, f, r, n.String, ts.String, dt.String, ok, fence)
	}
	read(2)
	if !s.Valid || s.String != "" || !v.Valid || b == nil || len(b) != 0 || f.Float64 != -1.7976931348623157e308 || n.String != "-0.001" || ts.Valid || ok.Int64 != 0 {
		t.Errorf("row 2 (empty values) read back as %q %q %q %v %q %v %v", s.String, v.String, b, f, n.String, ts, ok)
	}
	read(3)
	if s.Valid || v.Valid || b != nil || j.Valid || f.Valid || n.Valid || ok.Valid {
		t.Errorf("row 3 (NULLs) read back as %v %v %v %v %v %v %v", s, v, b, j, f, n, ok)
	}
	read(4)
	if s.String != `\N` || v.String != `\N` {
		t.Errorf(`row 4 (the text \N) read back as %q %q`, s.String, v.String)
	}
	blank := func(id int64, v any) []any { return row(id, nil, v, nil, nil, nil, nil, nil, nil, nil, nil) }
	if err := write(blank(5, nil), blank(1, nil)); !errors.Is(err, dialect.ErrConflict) {
		t.Errorf("an existing key: %v, want ErrConflict", err)
	}
	if err := write(blank(6, "abcd")); !errors.Is(err, dialect.ErrNotBulk) {
		t.Errorf("a value MySQL would cut: %v, want ErrNotBulk", err)
	}
	if err := write(blank(7, struct{}{})); !errors.Is(err, dialect.ErrNotBulk) {
		t.Errorf("a value of an unknown type: %v, want ErrNotBulk", err)
	}
	var count int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&count); err != nil || count != 4 {
		t.Errorf("%d rows, %v; want the 4 first ones only", count, err)
	}
}

// LOAD DATA writes a float32 as the upsert does, by the exact text of its
// double: MySQL parses a number's text as a double before it rounds it to
// a FLOAT, so the float32's own shortest text can land on its neighbour
// (7.038531e-26 on 7.0385313e-26) or out of range (3.4028235e38).
func TestMySQL_InsertNewFloat32(t *testing.T) {
	db, d := openMySQL(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "CREATE TABLE f (id bigint PRIMARY KEY, r float, g double, _fence bigint NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	vals := []float32{7.038531e-26, 3.4028235e38, 1.2345678, 1.4e-45}
	var rows [][]any
	for i, v := range vals {
		rows = append(rows, []any{int64(i), v, v})
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := dialect.InsertNew(ctx, d.(dialect.BulkInserter), conn, []string{"f"}, tableColumns(t, db, d, "f"), "_fence", 1, rows); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		var r, g float64
		if err := db.QueryRowContext(ctx, "SELECT r + 0e0, g FROM f WHERE id = ?", i).Scan(&r, &g); err != nil {
			t.Fatal(err)
		}
		if r != float64(v) || g != float64(v) {
			t.Errorf("float32 %v read back as FLOAT %v, DOUBLE %v; want %v", v, r, g, float64(v))
		}
	}
}
