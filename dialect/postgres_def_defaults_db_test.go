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
