package dialect_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
)

// A page read by passthrough and loaded into another database is the
// source's rows exactly (NULLs, empty strings, every type of the
// whitelist), each with the token; its keys are the keyset reader's
// (int64, string); the page cuts anywhere; a row that exists is
// ErrConflict.
func TestPostgres_Passthrough(t *testing.T) {
	src := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	dst := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	ctx := t.Context()
	const ddl = `CREATE TABLE "Mixed" (k int, s varchar(20), i2 smallint, n numeric(12,2), f float8, r real, b bytea, ok boolean,
  u uuid, d date, ts timestamp, tz timestamptz, tm time, iv interval, j jsonb, js json, ip inet, c char(3), t text,
  PRIMARY KEY (k, s))`
	if _, err := src.ExecContext(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.ExecContext(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.ExecContext(ctx, `ALTER TABLE "Mixed" ADD COLUMN _fence bigint NOT NULL DEFAULT 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := src.ExecContext(ctx, `INSERT INTO "Mixed" VALUES
  (1, 'a', -32768, 1234567890.12, 'NaN', '-Infinity', '\x00ff5c', true, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '0001-01-01',
   '2024-02-29 23:59:59.999999', '2024-02-29 23:59:59.999999+05:30', '24:00:00', '1 year 2 mons -3 days 04:05:06', '{"a": [1, "x\ty"]}', '{ "b" :1 }', '::1/128', 'ab', e'tab\there\nnew'),
  (1, '', 0, -0.01, -0.0, 1.5, '', false, NULL, 'infinity', '-infinity', 'infinity', '00:00', '0', 'null', '[]', '10.0.0.0/8', '', ''),
  (2, 'z', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	cols := tableColumns(t, src, dialect.Postgres{}, "Mixed")
	d := dialect.Postgres{}
	if !d.Passthrough(cols, cols, []string{"k", "s"}) {
		t.Fatalf("passthrough refused for %v", cols)
	}
	other := append([]dialect.Column(nil), cols...)
	other[3].Type = "numeric(14,2)"
	if d.Passthrough(cols, other, []string{"k", "s"}) || d.Passthrough(cols, cols, []string{"u"}) ||
		d.Passthrough([]dialect.Column{{Name: "e", Type: "mood", Base: "mood"}}, []dialect.Column{{Name: "e", Type: "mood", Base: "mood"}}, []string{"e"}) {
		t.Error("passthrough allowed for another type, a key it cannot decode, or a user type")
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	q := d.SelectPage([]string{"Mixed"}, names, []string{"k", "s"}, false, dialect.Range{}, 10)
	page, err := d.ReadRaw(ctx, src, q.SQL, nil, []int{0, 1}, 42, 10)
	if err != nil {
		t.Fatal(err)
	}
	if page.Len() != 3 || fmt.Sprint(page.Keys) != "[[1 ] [1 a] [2 z]]" || fmt.Sprintf("%T %T", page.Keys[0][0], page.Keys[0][1]) != "int64 string" {
		t.Fatalf("keys %v (%T)", page.Keys, page.Keys[0][0])
	}
	load := func(p dialect.RawPage) error {
		conn, err := dst.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.LoadRaw(ctx, conn, []string{"Mixed"}, cols, "_fence", p); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	if err := load(page.Head(2)); err != nil {
		t.Fatal(err)
	}
	if err := load(page); !errors.Is(err, dialect.ErrConflict) {
		t.Fatalf("a page with rows the target holds: %v", err)
	}
	if err := load(page.Tail(2)); err != nil { // the row after the cut
		t.Fatal(err)
	}
	if tl := page.Tail(1); tl.Len() != 2 || fmt.Sprint(tl.Last()) != "[2 z]" || len(tl.Head(1).Data) != page.Ends[1]-page.Ends[0] {
		t.Errorf("tail of 1: %d rows, last %v", tl.Len(), tl.Last())
	}
	const all = `SELECT string_agg(row(m.*)::text, '|' ORDER BY k, s) FROM "Mixed" m`
	var want, got string
	if err := src.QueryRowContext(ctx, all).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if err := dst.QueryRowContext(ctx, `SELECT string_agg(row(k, s, i2, n, f, r, b, ok, u, d, ts, tz, tm, iv, j, js, ip, c, t)::text, '|' ORDER BY k, s) FROM "Mixed" m`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("target rows\n%s\nsource rows\n%s", got, want)
	}
	var tokens string
	if err := dst.QueryRowContext(ctx, `SELECT string_agg(DISTINCT _fence::text, ',') FROM "Mixed"`).Scan(&tokens); err != nil || tokens != "42" {
		t.Errorf("tokens %q, %v", tokens, err)
	}
}
