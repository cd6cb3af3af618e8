package dialect_test

import (
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
)

// identCols are column names that need quoting in both engines: upper
// case, a space, a double quote, a backtick, non-ASCII letters.
var identCols = []string{"Id", "my col", `qu"ote`, "back`tick", "naïve"}

// catalogLookups checks the catalog queries of d on a table whose table and
// column names need quoting: the table exists (a missing one does not), its
// columns come in order with their base types, its primary key is found.
func catalogLookups(t *testing.T, db *sql.DB, d dialect.Dialect, table []string, wantBase []string) {
	t.Helper()
	ctx := t.Context()
	exists := func(table []string) bool {
		t.Helper()
		q, args := d.TableExists(table)
		var ok bool
		if err := db.QueryRowContext(ctx, q, args...).Scan(&ok); err != nil {
			t.Fatalf("TableExists(%q): %v", table, err)
		}
		return ok
	}
	if !exists(table) {
		t.Errorf("TableExists(%q) = false", table)
	}
	missing := slices.Clone(table)
	missing[len(missing)-1] += "_missing"
	if exists(missing) {
		t.Errorf("TableExists(%q) = true", missing)
	}
	lower := slices.Clone(table)
	lower[len(lower)-1] = strings.ToLower(lower[len(lower)-1])
	if exists(lower) {
		t.Errorf("TableExists(%q) = true: the lookup ignores case", lower)
	}

	q, args := d.Columns(table)
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		t.Fatalf("Columns(%q): %v", table, err)
	}
	var names, bases []string
	for rows.Next() {
		var c dialect.Column
		if err := rows.Scan(&c.Name, &c.Type, &c.Base, &c.NotNull); err != nil {
			t.Fatal(err)
		}
		names, bases = append(names, c.Name), append(bases, c.Base)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rows.Close()
	if !slices.Equal(names, identCols) || !slices.Equal(bases, wantBase) {
		t.Errorf("Columns(%q) = %q %q, want %q %q", table, names, bases, identCols, wantBase)
	}

	q, args = d.UniqueKeys(table)
	var keys []string
	rows, err = db.QueryContext(ctx, q, args...)
	if err != nil {
		t.Fatalf("UniqueKeys(%q): %v", table, err)
	}
	for rows.Next() {
		var idx, col string
		if err := rows.Scan(&idx, &col); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, col)
	}
	_ = rows.Close()
	if !slices.Equal(keys, []string{"Id", "my col"}) {
		t.Errorf("UniqueKeys(%q) = %q, want the primary key (Id, my col)", table, keys)
	}

	// The statements built from these names run.
	for _, s := range []string{d.CountRows(table), d.KeyBounds(table, "Id")} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	q, args = d.EstimateRows(table)
	var n int64
	if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		t.Errorf("EstimateRows(%q): %v", table, err)
	}
}

// createIdentTable creates table with identCols of the types given, and
// the primary key (Id, my col), by d's own CreateTable.
func createIdentTable(t *testing.T, db *sql.DB, d dialect.Dialect, table []string, types []string) {
	t.Helper()
	cols := make([]dialect.Column, len(identCols))
	for i, n := range identCols {
		cols[i] = dialect.Column{Name: n, Type: types[i], NotNull: i < 2}
	}
	ddl := d.CreateTable(table, cols, []string{"Id", "my col"}, "_fence")
	if _, err := db.ExecContext(t.Context(), ddl); err != nil {
		t.Fatalf("%s: %v", ddl, err)
	}
	// Without the fence column, AddFenceColumn adds it back; then it goes,
	// for the column list of catalogLookups.
	drop := "ALTER TABLE " + d.Quote(table...) + " DROP COLUMN " + d.Quote("_fence")
	for _, s := range []string{drop, d.AddFenceColumn(table, "_fence"), drop} {
		if _, err := db.ExecContext(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestIdent_PostgresCatalog(t *testing.T) {
	db := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	d := dialect.Postgres{}
	types := []string{"bigint", "numeric(12,2)", "text", "jsonb", "timestamp(6) without time zone"}
	bases := []string{"bigint", "numeric", "text", "jsonb", "timestamp without time zone"}
	createIdentTable(t, db, d, []string{`Ordérs "x"`}, types)
	catalogLookups(t, db, d, []string{`Ordérs "x"`}, bases)
	// In a schema whose name needs quoting too.
	if _, err := db.ExecContext(t.Context(), `CREATE SCHEMA "Sché ""ma"""`); err != nil {
		t.Fatal(err)
	}
	createIdentTable(t, db, d, []string{`Sché "ma"`, "Tab`le"}, types)
	catalogLookups(t, db, d, []string{`Sché "ma"`, "Tab`le"}, bases)
}

func TestIdent_MySQLCatalog(t *testing.T) {
	db, d := openMySQL(t)
	name := `Ordérs "x"`
	var lower int
	if err := db.QueryRowContext(t.Context(), "SELECT @@lower_case_table_names").Scan(&lower); err != nil {
		t.Fatal(err)
	}
	if lower != 0 {
		t.Skip("lower_case_table_names is set: table names are folded to lower case")
	}
	types := []string{"bigint", "decimal(12,2)", "longtext", "json", "datetime(6)"}
	createIdentTable(t, db, d, []string{name}, types)
	// MariaDB keeps JSON as longtext with a json_valid check that quotes the
	// column name, a backtick doubled: Columns must still report it as JSON.
	catalogLookups(t, db, d, []string{name}, []string{"bigint", "decimal", "longtext", "json", "datetime"})
}
