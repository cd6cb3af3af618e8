package dialect_test

import (
	"testing"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
)

// The source's functions, views, a materialized view and triggers, read
// with what each needs, are created in another database by their steps
// (each run twice: the second finds it done), in the order given; a view
// on a table not copied needs it; a disabled trigger stays disabled.
func TestPostgres_SchemaObjects(t *testing.T) {
	src := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	dst := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	d := dialect.Postgres{}
	tables := []string{
		"CREATE SCHEMA shop",
		"CREATE TABLE shop.items (id int PRIMARY KEY, qty int NOT NULL, tag text NOT NULL)",
		"CREATE TABLE shop.hidden (id int PRIMARY KEY)",
	}
	pgExec(t, src, tables...)
	pgExec(t, src,
		"CREATE FUNCTION shop.double(n int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT n * 2'",
		"CREATE FUNCTION shop.fill_tag() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN NEW.tag := coalesce(NEW.tag, 'x'); RETURN NEW; END$$",
		`CREATE VIEW shop."Big Items" WITH (security_barrier = true) AS SELECT id, shop.double(qty) AS q FROM shop.items WHERE qty > 1`,
		`CREATE VIEW shop.bigger AS SELECT id FROM shop."Big Items" WHERE q > 10 WITH LOCAL CHECK OPTION`,
		"CREATE MATERIALIZED VIEW shop.totals AS SELECT sum(qty) AS n FROM shop.items",
		"CREATE VIEW shop.on_hidden AS SELECT id FROM shop.hidden",
		"CREATE TRIGGER fill_tag BEFORE INSERT ON shop.items FOR EACH ROW EXECUTE FUNCTION shop.fill_tag()",
		"CREATE TRIGGER off_tag BEFORE UPDATE ON shop.items FOR EACH ROW EXECUTE FUNCTION shop.fill_tag()",
		"ALTER TABLE shop.items DISABLE TRIGGER off_tag",
		"CREATE TRIGGER hidden_tag BEFORE INSERT ON shop.hidden FOR EACH ROW EXECUTE FUNCTION shop.fill_tag()",
		"INSERT INTO shop.items VALUES (1, 5, 'a'), (2, 1, 'b')",
	)
	objs, err := d.SchemaObjects(t.Context(), src, [][]string{{"shop", "items"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var steps []dialect.Step
	for _, o := range objs {
		line := o.Kind + " " + o.Name
		for _, n := range o.Needs {
			line += " | " + n.What
			if n.Key == "" {
				line += " (not copied)"
			}
		}
		got = append(got, line)
		if o.Name != "shop.on_hidden" {
			steps = append(steps, o.Step)
		}
	}
	want := []string{
		"function shop.double(integer)",
		"function shop.fill_tag()",
		`view shop."Big Items" | function shop.double(integer)`,
		`view shop.bigger | view shop."Big Items"`,
		"view shop.on_hidden | table shop.hidden (not copied)",
		"materialized view shop.totals",
		"trigger fill_tag on shop.items | function shop.fill_tag()",
		"trigger off_tag on shop.items | function shop.fill_tag()",
	}
	if len(got) != len(want) {
		t.Fatalf("objects:\n%q\nwant\n%q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("object %d: %q, want %q", i, got[i], want[i])
		}
	}
	pgExec(t, dst, tables...)
	pgExec(t, dst, "INSERT INTO shop.items VALUES (1, 5, 'a'), (2, 1, 'b')")
	pgRunSteps(t, dst, steps)
	pgExec(t, dst, "INSERT INTO shop.items (id, qty) VALUES (3, 20)")
	for q, want := range map[string]int{
		"SELECT count(*) FROM shop.items WHERE tag = 'x'":                                      1,
		"SELECT count(*) FROM shop.bigger":                                                     1,
		"SELECT n FROM shop.totals":                                                            6,
		"SELECT count(*) FROM pg_trigger WHERE tgname = 'off_tag' AND tgenabled = 'D'":         1,
		`SELECT count(*) FROM pg_class WHERE relname = 'Big Items' AND reloptions IS NOT NULL`: 1,
	} {
		var n int
		if err := dst.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n != want {
			t.Errorf("%s: %d, want %d", q, n, want)
		}
	}
}
