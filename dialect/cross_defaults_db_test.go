package dialect_test

import (
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// A MySQL table's defaults that PostgreSQL has no value for — zero dates,
// a TIME past 24 hours, a bit literal out of the named type's range or for
// a type it means nothing in — are noted and left out, so that the CREATE
// TABLE succeeds; bit literals become the number, boolean or bit string
// they stand for in the type the plan named; an AUTO_INCREMENT column the
// plan gives a type no identity can have is created without one (noted).
func TestPostgres_CreateFromMySQL_Defaults(t *testing.T) {
	db := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	col := func(name, typ string, notNull bool, def dialect.Default) dialect.ColumnDef {
		return dialect.ColumnDef{Column: dialect.Column{Name: name, Type: typ, Base: strings.SplitN(typ, "(", 2)[0], NotNull: notNull}, Default: def}
	}
	lit := func(v string) dialect.Default {
		return dialect.Default{Kind: dialect.DefaultLiteral, Value: v, Expr: "'" + v + "'"}
	}
	bits := func(digits string) dialect.Default {
		return dialect.Default{Kind: dialect.DefaultExpr, Expr: "b'" + digits + "'"}
	}
	id := col("id", "numeric(20,0)", true, dialect.Default{})
	id.Identity = dialect.AutoIncrement
	def := &dialect.TableDef{
		Engine: plans.MySQL,
		Name:   []string{"zeros"},
		Columns: []dialect.ColumnDef{id,
			col("d", "date", true, lit("0000-00-00")),
			col("dt", "timestamp(0)", false, lit("2024-00-10 10:00:00")),
			col("tm", "time(0)", false, lit("838:59:59")),
			col("day", "date", false, lit("2024-02-29")),
			col("flags", "integer", false, bits("0")),
			col("mask", "bit(16)", false, bits("101")),
			col("vary", "bit varying(16)", false, bits("11")),
			col("ok", "boolean", true, bits("1")),
			col("small", "smallint", false, bits("11111111111111111")),
			col("word", "text", false, bits("1")),
		},
		PrimaryKey: &dialect.Index{Name: "PRIMARY", Unique: true, Parts: []dialect.IndexPart{{Column: "id"}}, Method: "btree"},
	}
	cr := dialect.Postgres{}.Create(def, "_fence")
	pgRunCreated(t, db, cr)
	notes := strings.Join(cr.Notes, "\n")
	for _, w := range []string{"column id: AUTO_INCREMENT not reproduced", "column d: default '0000-00-00' not created", "column dt: default '2024-00-10 10:00:00' not created",
		"column tm: default '838:59:59' not created", "column small: default b'11111111111111111' not created: out of range", "column word: default b'1' not created"} {
		if !strings.Contains(notes, w) {
			t.Errorf("no note %q in:\n%s", w, notes)
		}
	}
	if len(cr.Notes) != 6 {
		t.Errorf("%d notes, want 6:\n%s", len(cr.Notes), notes)
	}
	var day, mask, vary string
	var flags int
	var ok bool
	if err := db.QueryRowContext(t.Context(), `INSERT INTO zeros (id, d) VALUES (18446744073709551615, '2024-01-01') RETURNING day::text, flags, mask::text, vary::text, ok`).
		Scan(&day, &flags, &mask, &vary, &ok); err != nil {
		t.Fatal(err)
	}
	if day != "2024-02-29" || flags != 0 || mask != "0000000000000101" || vary != "0000000000000011" || !ok {
		t.Errorf("defaults: day %s flags %d mask %s vary %s ok %v", day, flags, mask, vary, ok)
	}
}

// A PostgreSQL table's constant defaults MySQL has no value for (NaN and
// the infinities of numbers and timestamps), a bytea constant (its text
// form is not its bytes) and a bit literal are noted and left out, so
// that the CREATE TABLE succeeds; the others are kept.
func TestMySQL_CreateFromPostgres_Defaults(t *testing.T) {
	db, d, _ := openMySQLDB(t)
	col := func(name, typ string, def dialect.Default) dialect.ColumnDef {
		return dialect.ColumnDef{Column: dialect.Column{Name: name, Type: typ, Base: strings.SplitN(typ, "(", 2)[0]}, Default: def}
	}
	lit := func(v, expr string) dialect.Default {
		return dialect.Default{Kind: dialect.DefaultLiteral, Value: v, Expr: expr}
	}
	id := col("id", "bigint", dialect.Default{})
	id.NotNull = true
	def := &dialect.TableDef{
		Engine: plans.Postgres,
		Name:   []string{"specials"},
		Columns: []dialect.ColumnDef{id,
			col("until", "datetime(6)", lit("infinity", "'infinity'::timestamp without time zone")),
			col("ratio", "double", lit("NaN", "'NaN'::double precision")),
			col("amount", "decimal(10,2)", lit("-Infinity", "'-Infinity'::numeric")),
			col("blob", "longblob", lit(`\x0102`, `'\x0102'::bytea`)),
			col("mask", "bit(4)", dialect.Default{Kind: dialect.DefaultExpr, Expr: `B'0101'::"bit"`}),
			col("day", "date", lit("2024-02-29", "'2024-02-29'::date")),
		},
		PrimaryKey: &dialect.Index{Name: "specials_pkey", Unique: true, Constraint: true, Parts: []dialect.IndexPart{{Column: "id"}}, Method: "btree"},
	}
	cr := d.Create(def, "_fence")
	execAll(t, db, cr.Table)
	notes := strings.Join(cr.Notes, "\n")
	for _, w := range []string{"column until: not created, infinity has no MySQL value", "column ratio: not created, NaN has no MySQL value",
		"column amount: not created, -Infinity has no MySQL value", "column blob: not created, a bytea constant is not translated", "column mask: not created"} {
		if !strings.Contains(notes, w) {
			t.Errorf("no note %q in:\n%s", w, notes)
		}
	}
	var day string
	execAll(t, db, "INSERT INTO specials (id) VALUES (1)")
	if err := db.QueryRowContext(t.Context(), "SELECT CAST(day AS char) FROM specials").Scan(&day); err != nil || day != "2024-02-29" {
		t.Errorf("day %q %v, want its default 2024-02-29", day, err)
	}
}
