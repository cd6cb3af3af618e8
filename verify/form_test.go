package verify_test

import (
	"slices"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/verify"
)

// MySQL bit and spatial values copied to PostgreSQL in the form a plan's
// types: asked (bit(1) as boolean, bit(16) as integer and as bit(16), a
// point as bytea holding its WKB) compare equal to their source, and a
// real difference in each still shows.
func TestCompare_MySQLBitAndSpatialToPostgres(t *testing.T) {
	ctx := t.Context()
	dsn, err := plans.ParseDSN(testsvc.NewMySQLDB(t))
	if err != nil {
		t.Fatal(err)
	}
	my, myD, err := dialect.Open(ctx, dialect.MySQL{}, dsn, dialect.Session{RawTimes: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = my.Close() })
	mustExec(t, my, "CREATE TABLE g (id int NOT NULL PRIMARY KEY, ok bit(1), n bit(16), b bit(16), p point)")
	mustExec(t, my, "INSERT INTO g VALUES (1, b'1', b'0000000100000010', b'101', ST_GeomFromText('POINT(1 2)')), "+
		"(2, b'0', 0, 0, ST_GeomFromText('POINT(-3.5 4)', 4326)), (3, NULL, NULL, NULL, NULL), (4, b'1', 7, 7, ST_GeomFromText('POINT(0 0)'))")
	pg := openPG(t)
	mustExec(t, pg, "CREATE TABLE g (id int PRIMARY KEY, ok boolean, n integer, b bit(16), p bytea)")
	mustExec(t, pg, `INSERT INTO g VALUES (1, true, 258, B'0000000000000101', '\x0101000000000000000000f03f0000000000000040'),
		(2, false, 0, B'0000000000000000', '\x01010000000000000000000cc00000000000001040'), (3, NULL, NULL, NULL, NULL),
		(4, false, 8, B'0000000000000110', '\x010100000000000000000000000000000000000040')`)
	src := []dialect.Column{{Name: "id", Type: "int", Base: "int"}, {Name: "ok", Type: "bit(1)", Base: "bit"}, {Name: "n", Type: "bit(16)", Base: "bit"},
		{Name: "b", Type: "bit(16)", Base: "bit"}, {Name: "p", Type: "point", Base: "point"}}
	dst := []dialect.Column{{Name: "id", Type: "integer", Base: "integer"}, {Name: "ok", Type: "boolean", Base: "boolean"}, {Name: "n", Type: "integer", Base: "integer"},
		{Name: "b", Type: "bit(16)", Base: "bit"}, {Name: "p", Type: "bytea", Base: "bytea"}}
	res, err := verify.Compare(ctx, verify.Side{DB: my, SQL: myD, Table: []string{"g"}, Columns: src},
		verify.Side{DB: pg, SQL: dialect.Postgres{}, Table: []string{"g"}, Columns: dst}, verify.Options{Name: "g", Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.SourceRows != 4 || res.Changed != 1 || len(res.Samples) != 1 || res.Samples[0].Key != "4" ||
		!slices.Equal(res.Samples[0].Columns, []string{"ok", "n", "b", "p"}) {
		t.Fatalf("want row 4 alone changed, in every column: %+v", res)
	}
}
