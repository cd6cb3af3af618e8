package dialect_test

import (
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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
	d := detect(t, dst)
	if !d.Passthrough(detect(t, src), cols, cols, []string{"k", "s"}) {
		t.Fatalf("passthrough refused for %v", cols)
	}
	other := append([]dialect.Column(nil), cols...)
	other[3].Type = "numeric(14,2)"
	if d.Passthrough(d, cols, other, []string{"k", "s"}) || d.Passthrough(d, cols, cols, []string{"u"}) ||
		d.Passthrough(d, []dialect.Column{{Name: "e", Type: "mood", Base: "mood"}}, []dialect.Column{{Name: "e", Type: "mood", Base: "mood"}}, []string{"e"}) {
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

// detect is the PostgreSQL dialect of db's server.
func detect(t *testing.T, db *sql.DB) dialect.Postgres {
	t.Helper()
	d, err := dialect.Postgres{}.Detect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	return d.(dialect.Postgres)
}

// Passthrough between servers of different major versions passes only the
// types whose binary form both read alike: not interval, whose 'infinity'
// PostgreSQL 17 sends as a tuple an older server stores as a finite
// interval (shown here on the server at hand when it is older than 17),
// nor numeric; and nothing between servers whose datetimes differ, or
// one not detected. The server's version is read from a real server; the
// other's is given.
func TestPostgres_PassthroughAcrossVersions(t *testing.T) {
	db := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	ctx := t.Context()
	here := detect(t, db)
	var num int
	if err := db.QueryRowContext(ctx, `SHOW server_version_num`).Scan(&num); err != nil {
		t.Fatal(err)
	}
	if here.Server.Major != num/10000 || !here.Server.IntegerDatetimes {
		t.Fatalf("detected %+v on a server of version %d", here.Server, num)
	}

	// What an older server makes of PostgreSQL 17's 'infinity'.
	if _, err := db.ExecContext(ctx, `CREATE TABLE iv (k int PRIMARY KEY, v interval, _fence bigint NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	tuple := binary.BigEndian.AppendUint16(nil, 3)
	tuple = binary.BigEndian.AppendUint32(tuple, 4)
	tuple = binary.BigEndian.AppendUint32(tuple, 1)
	tuple = binary.BigEndian.AppendUint32(tuple, 16)
	tuple = binary.BigEndian.AppendUint64(tuple, math.MaxInt64)
	tuple = binary.BigEndian.AppendUint32(tuple, math.MaxInt32)
	tuple = binary.BigEndian.AppendUint32(tuple, math.MaxInt32)
	tuple = binary.BigEndian.AppendUint32(tuple, 8)
	tuple = binary.BigEndian.AppendUint64(tuple, 7)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ivCols := []dialect.Column{{Name: "k", Type: "integer", Base: "integer"}, {Name: "v", Type: "interval", Base: "interval"}}
	if err := here.LoadRaw(ctx, conn, []string{"iv"}, ivCols, "_fence", dialect.RawPage{Data: tuple, Ends: []int{len(tuple)}, Keys: [][]any{{int64(1)}}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := db.QueryRowContext(ctx, `SELECT v::text FROM iv`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := "178956970 years 7 mons 2147483647 days 2562047788:00:54.775807"; here.Server.Major < 17 && stored != want {
		t.Errorf("PostgreSQL %d stored PostgreSQL 17's infinite interval as %q, want %q", here.Server.Major, stored, want)
	}

	col := func(typ, base string) []dialect.Column {
		return []dialect.Column{{Name: "k", Type: "bigint", Base: "bigint"}, {Name: "c", Type: typ, Base: base}}
	}
	other := func(major int, intDatetimes bool) dialect.Postgres {
		return dialect.Postgres{Server: dialect.PgServer{Major: major, IntegerDatetimes: intDatetimes}}
	}
	newer, older := other(here.Server.Major+2, true), other(here.Server.Major-1, true)
	for _, tc := range []struct {
		name     string
		from, to dialect.Dialect
		cols     []dialect.Column
		want     bool
	}{
		{"same server, interval", here, here, col("interval", "interval"), true},
		{"same server, numeric", here, here, col("numeric(12,2)", "numeric"), true},
		{"same major, jsonb", here, other(here.Server.Major, true), col("jsonb", "jsonb"), true},
		{"newer source, interval", newer, here, col("interval", "interval"), false},
		{"older source, interval", older, here, col("interval", "interval"), false},
		{"newer target, interval", here, newer, col("interval", "interval"), false},
		{"newer source, numeric", newer, here, col("numeric(12,2)", "numeric"), false},
		{"newer source, jsonb", newer, here, col("jsonb", "jsonb"), false},
		{"newer source, text", newer, here, col("text", "text"), true},
		{"newer source, timestamptz", newer, here, col("timestamp(3) with time zone", "timestamp with time zone"), true},
		{"older target, bytea", here, older, col("bytea", "bytea"), true},
		{"float datetimes, text", other(here.Server.Major, false), here, col("text", "text"), false},
		{"source not detected", dialect.Postgres{}, here, col("text", "text"), false},
		{"target not detected", here, dialect.Postgres{}, col("text", "text"), false},
		{"another engine", dialect.MySQL{}, here, col("text", "text"), false},
	} {
		if got := tc.to.(dialect.Postgres).Passthrough(tc.from, tc.cols, tc.cols, []string{"k"}); got != tc.want {
			t.Errorf("%s: Passthrough %v, want %v", tc.name, got, tc.want)
		}
	}
}
