package dialect_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// appSchema is an application's schema: AUTO_INCREMENT keys (one not
// first in its primary key), a composite key, self-referencing and
// composite foreign keys, ENUM and SET members in mixed case, YEAR,
// timestamps set on insert and update, constant and expression defaults,
// unique, composite, prefix and FULLTEXT indexes, generated columns,
// checks, comments, mixed-case names.
var appSchema = []string{
	"CREATE TABLE `Accounts` (\n" +
		"  `Id` int unsigned NOT NULL AUTO_INCREMENT,\n" +
		"  `Email` varchar(190) NOT NULL,\n" +
		"  `Status` enum('Active','in''active','a\\\\b','PG-13') NOT NULL DEFAULT 'Active' COMMENT 'the account''s status',\n" +
		"  flags set('X','y','Zz') DEFAULT 'X,y',\n" +
		"  born year DEFAULT 2000,\n" +
		"  created_at timestamp(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),\n" +
		"  updated_at datetime NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
		"  note varchar(50) DEFAULT 'it''s a \\\\ b',\n" +
		"  opened date DEFAULT (CURRENT_DATE),\n" +
		"  qty int NOT NULL DEFAULT 1 CHECK (qty < 1000),\n" +
		"  price decimal(8,2) DEFAULT 9.99,\n" +
		"  total decimal(12,2) AS (qty * price) STORED,\n" +
		"  email_lc varchar(190) AS (lower(`Email`)) VIRTUAL,\n" +
		"  bio text,\n" +
		"  doc json,\n" +
		"  parent_id int unsigned,\n" +
		"  PRIMARY KEY (`Id`),\n" +
		"  UNIQUE KEY uq_email (`Email`),\n" +
		"  KEY ix_comp (qty, created_at DESC),\n" +
		"  KEY ix_pref (note(10)),\n" +
		"  FULLTEXT KEY ft_bio (bio),\n" +
		"  CONSTRAINT chk_qty CHECK (qty > 0),\n" +
		"  CONSTRAINT accounts_parent FOREIGN KEY (parent_id) REFERENCES `Accounts` (`Id`) ON DELETE SET NULL\n" +
		") COMMENT='application accounts'",
	"CREATE TABLE `Order Lines` (\n" +
		"  order_id int NOT NULL,\n" +
		"  line smallint NOT NULL,\n" +
		"  account_id int unsigned NOT NULL,\n" +
		"  PRIMARY KEY (order_id, line),\n" +
		"  CONSTRAINT lines_account FOREIGN KEY (account_id) REFERENCES `Accounts` (`Id`) ON DELETE CASCADE\n" +
		")",
	"CREATE TABLE shipments (\n" +
		"  id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,\n" +
		"  order_id int, line smallint,\n" +
		"  CONSTRAINT ship_line FOREIGN KEY (order_id, line) REFERENCES `Order Lines` (order_id, line) ON DELETE CASCADE ON UPDATE CASCADE\n" +
		")",
	"CREATE TABLE events (\n" +
		"  tenant int NOT NULL,\n" +
		"  seq bigint NOT NULL AUTO_INCREMENT,\n" +
		"  PRIMARY KEY (tenant, seq),\n" +
		"  KEY ix_seq (seq)\n" +
		")",
}

// appObjects are what migrate does not copy.
var appObjects = []string{
	"CREATE VIEW active_accounts AS SELECT `Id`, `Email` FROM `Accounts` WHERE `Status` = 'Active'",
	"CREATE TRIGGER lines_bi BEFORE INSERT ON `Order Lines` FOR EACH ROW SET NEW.line = NEW.line",
	"CREATE PROCEDURE touch_accounts() UPDATE `Accounts` SET qty = qty",
	"CREATE FUNCTION one() RETURNS int DETERMINISTIC RETURN 1",
	"CREATE EVENT purge_events ON SCHEDULE EVERY 1 DAY DO DELETE FROM events WHERE tenant < 0",
}

// openMySQLDB is a fresh database and its name.
func openMySQLDB(t *testing.T) (*sql.DB, dialect.Dialect, string) {
	t.Helper()
	db, d := openMySQL(t)
	var name string
	if err := db.QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return db, d, name
}

func execAll(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(t.Context(), s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func TestMySQL_ListTables(t *testing.T) {
	db, d, _ := openMySQLDB(t)
	execAll(t, db, appSchema...)
	execAll(t, db, appObjects[0], "CREATE TABLE _migrate_fence (x int)")
	got, err := d.ListTables(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"Accounts"}, {"Order Lines"}, {"events"}, {"shipments"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ListTables = %q, want %q", got, want)
	}
	if _, err := d.ReadTable(t.Context(), db, []string{"nope"}); err != dialect.ErrNoTable {
		t.Errorf("ReadTable of a missing table: %v, want ErrNoTable", err)
	}
	if _, err := d.ReadTable(t.Context(), db, []string{"active_accounts"}); err != dialect.ErrNoTable {
		t.Errorf("ReadTable of a view: %v, want ErrNoTable", err)
	}
}

// TestMySQL_ReadTable reads an application's table whole.
func TestMySQL_ReadTable(t *testing.T) {
	db, d, _ := openMySQLDB(t)
	execAll(t, db, appSchema...)
	def, err := d.ReadTable(t.Context(), db, []string{"Accounts"})
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) dialect.ColumnDef {
		for _, c := range def.Columns {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no column %s in %s", name, dump(def.Columns))
		return dialect.ColumnDef{}
	}
	lit := func(v string) dialect.Default { return dialect.Default{Kind: dialect.DefaultLiteral, Value: v} }
	for _, w := range []struct {
		name    string
		typ     string
		values  []string
		def     dialect.Default
		ident   string
		gen     string
		stored  bool
		comment string
		update  string
	}{
		{name: "Id", typ: "int(10) unsigned", ident: dialect.AutoIncrement},
		{name: "Status", typ: `enum('Active','in''active','a\\b','PG-13')`, values: []string{"Active", "in'active", `a\b`, "PG-13"}, def: lit("Active"), comment: "the account's status"},
		{name: "flags", typ: "set('X','y','Zz')", values: []string{"X", "y", "Zz"}, def: lit("X,y")},
		{name: "born", typ: "year(4)", def: lit("2000")},
		{name: "created_at", typ: "timestamp(6)", def: dialect.Default{Kind: dialect.DefaultNow}},
		{name: "updated_at", typ: "datetime", def: dialect.Default{Kind: dialect.DefaultNow}, update: "current_timestamp()"},
		{name: "note", typ: "varchar(50)", def: lit(`it's a \ b`)},
		{name: "opened", typ: "date", def: dialect.Default{Kind: dialect.DefaultExpr}},
		{name: "qty", typ: "int(11)", def: lit("1")},
		{name: "price", typ: "decimal(8,2)", def: lit("9.99")},
		{name: "total", typ: "decimal(12,2)", gen: "`qty` * `price`", stored: true},
		{name: "email_lc", typ: "varchar(190)", gen: "lcase(`Email`)"},
		{name: "doc", typ: "longtext"},
		{name: "parent_id", typ: "int(10) unsigned"},
	} {
		c := col(w.name)
		got := []any{c.Type, c.Values, c.Default.Kind, c.Default.Value, c.Identity, c.Generated, c.Stored, c.Comment, c.OnUpdate}
		want := []any{w.typ, w.values, w.def.Kind, w.def.Value, w.ident, w.gen, w.stored, w.comment, w.update}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("column %s: got %q, want %q", w.name, got, want)
		}
		if w.def.Kind != "" && c.Default.Expr == "" {
			t.Errorf("column %s: default without its expression", w.name)
		}
	}
	if c := col("doc"); c.Base != "json" {
		t.Errorf("doc's base %q, want json", c.Base)
	}
	if c := col("Status"); !c.NotNull {
		t.Errorf("Status is NOT NULL")
	}
	if def.Comment != "application accounts" || !reflect.DeepEqual(def.Name, []string{"Accounts"}) {
		t.Errorf("name %q, comment %q", def.Name, def.Comment)
	}
	if def.PrimaryKey == nil || !reflect.DeepEqual(def.PrimaryKey.Columns(), []string{"Id"}) {
		t.Errorf("primary key %s", dump(def.PrimaryKey))
	}
	idx := map[string]dialect.Index{}
	for _, x := range def.Indexes {
		idx[x.Name] = x
	}
	part := func(c string) dialect.IndexPart { return dialect.IndexPart{Column: c} }
	for name, want := range map[string]dialect.Index{
		"uq_email":        {Name: "uq_email", Unique: true, Method: "btree", Parts: []dialect.IndexPart{part("Email")}},
		"ix_comp":         {Name: "ix_comp", Method: "btree", Parts: []dialect.IndexPart{part("qty"), {Column: "created_at", Desc: true}}},
		"ix_pref":         {Name: "ix_pref", Method: "btree", Parts: []dialect.IndexPart{{Column: "note", Prefix: 10}}},
		"ft_bio":          {Name: "ft_bio", Method: "fulltext", Parts: []dialect.IndexPart{part("bio")}},
		"accounts_parent": {Name: "accounts_parent", Method: "btree", Parts: []dialect.IndexPart{part("parent_id")}}, // the foreign key's
	} {
		if !reflect.DeepEqual(idx[name], want) {
			t.Errorf("index %s: got %s, want %s", name, dump(idx[name]), dump(want))
		}
	}
	if len(def.Indexes) != 5 {
		t.Errorf("%d indexes, want 5: %s", len(def.Indexes), dump(def.Indexes))
	}
	wantFK := []dialect.ForeignKey{{Name: "accounts_parent", Columns: []string{"parent_id"}, RefTable: []string{"Accounts"}, RefColumns: []string{"Id"}, OnDelete: "SET NULL", OnUpdate: "RESTRICT"}}
	if !reflect.DeepEqual(def.ForeignKeys, wantFK) {
		t.Errorf("foreign keys %s", dump(def.ForeignKeys))
	}
	// MariaDB names a column's own check after the column; the json_valid
	// check of doc is the json type's, not listed.
	wantChecks := []dialect.Check{{Name: "chk_qty", Expr: "`qty` > 0"}, {Name: "qty", Expr: "`qty` < 1000"}}
	if !reflect.DeepEqual(def.Checks, wantChecks) {
		t.Errorf("checks %s", dump(def.Checks))
	}
	ship, err := d.ReadTable(t.Context(), db, []string{"shipments"})
	if err != nil {
		t.Fatal(err)
	}
	wantFK = []dialect.ForeignKey{{Name: "ship_line", Columns: []string{"order_id", "line"}, RefTable: []string{"Order Lines"}, RefColumns: []string{"order_id", "line"}, OnDelete: "CASCADE", OnUpdate: "CASCADE"}}
	if !reflect.DeepEqual(ship.ForeignKeys, wantFK) {
		t.Errorf("composite foreign key %s", dump(ship.ForeignKeys))
	}
}

// TestMySQL_NotMigrated lists the views, triggers, routines, events and
// table grants of the database.
func TestMySQL_NotMigrated(t *testing.T) {
	db, d, name := openMySQLDB(t)
	execAll(t, db, appSchema...)
	execAll(t, db, appObjects...)
	user := "mg_app_" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	execAll(t, db, "CREATE USER '"+user+"'@'%' IDENTIFIED BY 'x-local-only'",
		"GRANT SELECT, UPDATE ON `"+name+"`.`Accounts` TO '"+user+"'@'%'")
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP USER IF EXISTS '"+user+"'@'%'") })
	got, err := d.NotMigrated(t.Context(), db, [][]string{{"Accounts"}, {"Order Lines"}, {"events"}, {"shipments"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []dialect.Object{
		{Kind: "view", Name: "active_accounts", Note: "reads Accounts", Key: "view:active_accounts"},
		{Kind: "trigger", Name: "lines_bi", Note: "BEFORE INSERT on table Order Lines", Key: "trigger:lines_bi"},
		{Kind: "function", Name: "one", Note: "function of the database", Key: "function:one"},
		{Kind: "procedure", Name: "touch_accounts", Note: "procedure of the database", Key: "procedure:touch_accounts"},
		{Kind: "event", Name: "purge_events", Note: "scheduled event (enabled)"},
		{Kind: "grant", Name: "Accounts", Note: "SELECT, UPDATE on Accounts to '" + user + "'@'%'"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NotMigrated:\n%s\nwant\n%s", dump(got), dump(want))
	}
}

// runStep runs a post-load step as the runner does (Value substituted,
// skipped when Exists says it is done), twice: the second is a no-op.
func runStep(t *testing.T, db *sql.DB, s dialect.Step) {
	t.Helper()
	ctx := t.Context()
	for i := range 2 {
		if s.Exists != "" {
			var done bool
			if err := db.QueryRowContext(ctx, s.Exists, s.ExistsArgs...).Scan(&done); err != nil {
				t.Fatalf("%v\n%s", err, s.Exists)
			}
			if done != (i == 1) {
				t.Errorf("step %s %s: exists = %v on run %d", s.Kind, s.Name, done, i+1)
			}
			if done {
				continue
			}
		}
		q := s.SQL
		if s.Value != "" {
			var n int64
			if err := db.QueryRowContext(ctx, s.Value, s.ValueArgs...).Scan(&n); err != nil {
				t.Fatalf("%v\n%s", err, s.Value)
			}
			q = strings.ReplaceAll(q, "{{n}}", strconv.FormatInt(n, 10))
		}
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("step %s %s: %v\n%s", s.Kind, s.Name, err, q)
		}
	}
}

// autoIncrement is a table's AUTO_INCREMENT counter.
func autoIncrement(t *testing.T, db *sql.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(t.Context(), "SELECT auto_increment FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMySQL_CreateRoundTrip: a table created in another database from its
// definition (types mapped as a run maps them), loaded, then given its
// post-load steps, reads back as the same definition; its AUTO_INCREMENT
// counter is above the rows copied.
func TestMySQL_CreateRoundTrip(t *testing.T) {
	src, d, srcName := openMySQLDB(t)
	dst, _, _ := openMySQLDB(t)
	ctx := t.Context()
	execAll(t, src, appSchema...)
	execAll(t, src,
		"INSERT INTO `Accounts` (`Id`, `Email`, `Status`, qty, bio) VALUES (1, 'a@x', 'PG-13', 1, 'one'), (500, 'b@x', 'a\\\\b', 2, 'two')",
		"UPDATE `Accounts` SET parent_id = 1 WHERE `Id` = 500",
		"INSERT INTO `Order Lines` VALUES (1, 1, 1), (1, 2, 500)",
		"INSERT INTO shipments VALUES (0, 1, 1), (42, 1, 2)", // id 0 kept: NO_AUTO_VALUE_ON_ZERO
		"INSERT INTO events VALUES (1, 7), (2, 300)")
	tables := []string{"Accounts", "Order Lines", "shipments", "events"}
	srcDefs := map[string]*dialect.TableDef{}
	var steps, fks []dialect.Step
	for _, name := range tables {
		def, err := d.ReadTable(ctx, src, []string{name})
		if err != nil {
			t.Fatal(err)
		}
		srcDefs[name] = def
		mapped := mapDef(t, def, plans.MySQL, plans.MySQL)
		cr := d.Create(mapped, "_fence")
		if len(cr.Notes) > 0 || len(cr.Skipped) > 0 {
			t.Errorf("%s: same-engine notes %q, skipped %q", name, cr.Notes, cr.Skipped)
		}
		execAll(t, dst, append(append(append([]string{}, cr.Before...), cr.Table), cr.After...)...)
		// The load: every written column.
		var cols []string
		for _, c := range def.Columns {
			if c.Generated == "" {
				cols = append(cols, d.Quote(c.Name))
			}
		}
		list := strings.Join(cols, ", ")
		execAll(t, dst, "INSERT INTO "+d.Quote(name)+" ("+list+") SELECT "+list+" FROM "+d.Quote(srcName, name))
		steps = append(steps, cr.Indexes...)
		fks = append(fks, cr.ForeignKeys...)
	}
	// The post-load phase: every index, then every foreign key.
	for _, s := range steps {
		runStep(t, dst, s)
	}
	if len(fks) != 3 {
		t.Errorf("%d foreign key steps, want 3", len(fks))
	}
	for _, s := range fks {
		runStep(t, dst, s)
	}
	for _, name := range tables {
		got, err := d.ReadTable(ctx, dst, []string{name})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range d.SequenceSteps(got) {
			runStep(t, dst, s)
		}
		got.Columns = slices.DeleteFunc(got.Columns, func(c dialect.ColumnDef) bool { return c.Name == "_fence" })
		if !reflect.DeepEqual(got, srcDefs[name]) {
			t.Errorf("%s read back:\n%s\nwant\n%s", name, dump(got), dump(srcDefs[name]))
		}
	}
	res, err := dst.ExecContext(ctx, "INSERT INTO `Accounts` (`Email`) VALUES ('new@x')")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := res.LastInsertId(); id != 501 {
		t.Errorf("next Id %d, want 501", id)
	}
	if n := autoIncrement(t, dst, "events"); n != 301 {
		t.Errorf("events' counter %d, want 301 (its AUTO_INCREMENT column is second in the key)", n)
	}
	// The counter is never lowered.
	execAll(t, dst, "ALTER TABLE `Accounts` AUTO_INCREMENT = 1000")
	def, err := d.ReadTable(ctx, dst, []string{"Accounts"})
	if err != nil {
		t.Fatal(err)
	}
	seq := d.SequenceSteps(def)
	if len(seq) != 1 {
		t.Fatalf("%d sequence steps, want 1", len(seq))
	}
	runStep(t, dst, seq[0])
	if n := autoIncrement(t, dst, "Accounts"); n != 1000 {
		t.Errorf("counter %d after the step, want 1000 kept", n)
	}
	var zero int
	if err := dst.QueryRowContext(ctx, "SELECT COUNT(*) FROM shipments WHERE id = 0").Scan(&zero); err != nil || zero != 1 {
		t.Errorf("shipment 0 copied: %d, %v", zero, err)
	}
	// The foreign keys work: deleting an account cascades to its lines
	// and their shipments, and sets its children's parent to NULL.
	execAll(t, dst, "DELETE FROM `Accounts` WHERE `Id` = 1")
	var lines, ships int
	var parent sql.NullInt64
	if err := dst.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM `Order Lines`), (SELECT COUNT(*) FROM shipments), (SELECT parent_id FROM `Accounts` WHERE `Id` = 500)").Scan(&lines, &ships, &parent); err != nil {
		t.Fatal(err)
	}
	if lines != 1 || ships != 1 || parent.Valid {
		t.Errorf("after the delete: %d lines, %d shipments, parent %v; want 1, 1, NULL", lines, ships, parent)
	}
}

// mapDef is def with its column types mapped from one engine to the
// other, as a run maps them before Create.
func mapDef(t *testing.T, def *dialect.TableDef, from, to plans.Engine) *dialect.TableDef {
	t.Helper()
	out := *def
	out.Columns = slices.Clone(def.Columns)
	cols := make([]dialect.Column, len(def.Columns))
	for i, c := range def.Columns {
		cols[i] = c.Column
	}
	var key []string
	if def.PrimaryKey != nil {
		key = def.PrimaryKey.Columns()
	}
	mapped, err := typemap.MapColumns(from, to, def.Name[len(def.Name)-1], cols, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range out.Columns {
		out.Columns[i].Type, out.Columns[i].Base = mapped[i].Type, mapped[i].Base
	}
	return &out
}

// pgItems is a PostgreSQL definition as the PostgreSQL reader gives it,
// with what MySQL has no form for: a partial unique index, a gin index.
func pgItems() (*dialect.TableDef, *dialect.TableDef) {
	col := func(name, typ, base string, notNull bool) dialect.ColumnDef {
		return dialect.ColumnDef{Column: dialect.Column{Name: name, Type: typ, Base: base, NotNull: notNull}}
	}
	tags := &dialect.TableDef{Engine: plans.Postgres, Name: []string{"tags"},
		Columns:    []dialect.ColumnDef{col("id", "integer", "integer", true), col("label", "character varying(20)", "character varying", false)},
		PrimaryKey: &dialect.Index{Name: "tags_pkey", Unique: true, Constraint: true, Method: "btree", Parts: []dialect.IndexPart{{Column: "id"}}},
	}
	tags.Columns[0].Identity = dialect.IdentitySerial
	tags.Columns[1].Default = dialect.Default{Kind: dialect.DefaultLiteral, Value: "it's \\ new", Expr: "'it''s \\ new'::character varying"}
	items := &dialect.TableDef{Engine: plans.Postgres, Name: []string{"items"}, Comment: "stock items",
		Columns: []dialect.ColumnDef{
			col("id", "bigint", "bigint", true),
			col("active", "boolean", "boolean", true),
			col("created", "timestamp(6) without time zone", "timestamp without time zone", true),
			col("sku", "text", "text", true),
			col("qty", "integer", "integer", false),
			col("a", "integer", "integer", false),
			col("doubled", "integer", "integer", false),
			col("doc", "jsonb", "jsonb", false),
			col("tag_id", "integer", "integer", false),
			col("day", "date", "date", false),
		},
		PrimaryKey: &dialect.Index{Name: "items_pkey", Unique: true, Constraint: true, Method: "btree", Parts: []dialect.IndexPart{{Column: "id"}}},
		Indexes: []dialect.Index{
			{Name: "items_sku_live", Unique: true, Method: "btree", Parts: []dialect.IndexPart{{Column: "sku"}}, Where: "(qty > 0)"},
			{Name: "items_doc", Method: "gin", Parts: []dialect.IndexPart{{Column: "doc"}}},
			{Name: "items_qty", Method: "btree", Parts: []dialect.IndexPart{{Column: "qty", Desc: true}}},
			{Name: "items_sku", Method: "btree", Parts: []dialect.IndexPart{{Column: "sku"}}},
		},
		ForeignKeys: []dialect.ForeignKey{{Name: "items_tag_fk", Columns: []string{"tag_id"}, RefTable: []string{"tags"}, RefColumns: []string{"id"}, OnDelete: "SET NULL", OnUpdate: "NO ACTION"}},
		Checks:      []dialect.Check{{Name: "qty_positive", Expr: "(qty > 0)"}},
		PartitionBy: "RANGE (created)",
	}
	items.Columns[0].Identity = dialect.IdentityAlways
	items.Columns[1].Default = dialect.Default{Kind: dialect.DefaultLiteral, Value: "true", Expr: "true"}
	items.Columns[2].Default = dialect.Default{Kind: dialect.DefaultNow, Expr: "now()"}
	items.Columns[3].Comment = "stock keeping unit"
	items.Columns[6].Generated, items.Columns[6].Stored = "(a * 2)", true
	items.Columns[9].Default = dialect.Default{Kind: dialect.DefaultExpr, Expr: "CURRENT_DATE"}
	return tags, items
}

// TestMySQL_CreateFromPostgres creates a PostgreSQL table on MySQL: what
// has a MySQL form is created, the rest is in Notes (or Skipped), never
// created wrong (a partial unique index as a full one).
func TestMySQL_CreateFromPostgres(t *testing.T) {
	db, d, _ := openMySQLDB(t)
	ctx := t.Context()
	tags, items := pgItems()
	var notes, skipped []string
	var steps []dialect.Step
	for _, def := range []*dialect.TableDef{tags, items} {
		cr := d.Create(mapDef(t, def, plans.Postgres, plans.MySQL), "_fence")
		t.Logf("%s\nnotes %q", cr.Table, cr.Notes)
		execAll(t, db, append(append(append([]string{}, cr.Before...), cr.Table), cr.After...)...)
		notes, skipped = append(notes, cr.Notes...), append(skipped, cr.Skipped...)
		steps = append(steps, cr.Indexes...)
		steps = append(steps, cr.ForeignKeys...)
	}
	for _, s := range steps {
		runStep(t, db, s)
	}
	noted := func(what string) bool {
		return slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, what) })
	}
	for _, w := range []string{"unique index items_sku_live", "index items_doc", "partitioned table", "identity always of column id"} {
		if !noted(w) {
			t.Errorf("no note of %s in %q", w, notes)
		}
	}
	got, err := d.ReadTable(ctx, db, []string{"items"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range got.Indexes {
		names = append(names, x.Name)
		if x.Unique {
			t.Errorf("unique index %s created", x.Name)
		}
	}
	// items_tag_fk's index is InnoDB's, made with the foreign key.
	if want := []string{"items_items_tag_fk", "items_qty", "items_sku"}; !reflect.DeepEqual(names, want) {
		t.Errorf("indexes %q, want %q", names, want)
	}
	if len(got.ForeignKeys) != 1 || got.ForeignKeys[0].Name != "items_items_tag_fk" || got.ForeignKeys[0].OnDelete != "SET NULL" {
		t.Errorf("foreign keys %s", dump(got.ForeignKeys))
	}
	if got.Comment != "stock items" {
		t.Errorf("comment %q", got.Comment)
	}
	// A translated check is named <table>_<name>; one without translation
	// is noted. So is a generated column's expression, or it is skipped.
	if !noted("check qty_positive") && !slices.Equal(checkNames(got), []string{"items_qty_positive"}) {
		t.Errorf("check neither created as items_qty_positive nor noted: %s, %q", dump(got.Checks), notes)
	}
	if !slices.Contains(skipped, "doubled") && !slices.ContainsFunc(got.Columns, func(c dialect.ColumnDef) bool { return c.Name == "doubled" && c.Stored }) {
		t.Errorf("generated column neither created stored nor skipped: %q", skipped)
	}
	// The same sku twice: the partial unique index covers no NULL qty.
	execAll(t, db, "INSERT INTO tags (label) VALUES (DEFAULT), ('b')",
		"INSERT INTO items (sku, qty, a, tag_id) VALUES ('x', 1, 2, 1), ('x', NULL, 2, 2)")
	var id, active int64
	var created sql.NullTime
	if err := db.QueryRowContext(ctx, "SELECT MAX(id), MIN(active), MIN(created) FROM items").Scan(&id, &active, &created); err != nil {
		t.Fatal(err)
	}
	if id != 2 || active != 1 || !created.Valid {
		t.Errorf("defaults: id %d, active %d, created %v; want 2, 1, now", id, active, created)
	}
	var label string
	if err := db.QueryRowContext(ctx, "SELECT label FROM tags WHERE id = 1").Scan(&label); err != nil || label != `it's \ new` {
		t.Errorf("tags' default %q, %v", label, err)
	}
	for _, s := range d.SequenceSteps(got) {
		runStep(t, db, s)
	}
}

func checkNames(def *dialect.TableDef) []string {
	var out []string
	for _, c := range def.Checks {
		out = append(out, c.Name)
	}
	return out
}

// A partitioned table's PARTITION BY clause is read from SHOW CREATE
// TABLE and reproduced.
func TestMySQL_PartitionedRoundTrip(t *testing.T) {
	src, d, srcName := openMySQLDB(t)
	dst, _, _ := openMySQLDB(t)
	execAll(t, src, "CREATE TABLE p (id int NOT NULL, created date NOT NULL, PRIMARY KEY (id, created))"+
		" PARTITION BY RANGE (YEAR(created)) (PARTITION p0 VALUES LESS THAN (2020), PARTITION `p max` VALUES LESS THAN MAXVALUE)")
	def, err := d.ReadTable(t.Context(), src, []string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(def.PartitionBy, "PARTITION BY RANGE (") || !strings.Contains(def.PartitionBy, "`p max`") || strings.Contains(def.PartitionBy, "*/") {
		t.Errorf("PartitionBy %q", def.PartitionBy)
	}
	cr := d.Create(mapDef(t, def, plans.MySQL, plans.MySQL), "_fence")
	execAll(t, dst, cr.Table)
	got, err := d.ReadTable(t.Context(), dst, []string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	if got.PartitionBy != def.PartitionBy {
		t.Errorf("read back %q, want %q", got.PartitionBy, def.PartitionBy)
	}
	// A table of another database is named with its schema.
	other, err := d.ReadTable(t.Context(), dst, []string{srcName, "p"})
	if err != nil || !reflect.DeepEqual(other.Name, []string{srcName, "p"}) || len(other.Columns) != 2 {
		t.Errorf("ReadTable of %s.p from another database: %v, %v", srcName, other, err)
	}
}

// TestMySQL_Collations: a MySQL table created from a MySQL definition
// keeps its default character set and collation and each text column's
// own (a case-insensitive column still finds 'AC/DC' for 'ac/dc'), and is
// InnoDB (a MyISAM source is noted).
func TestMySQL_Collations(t *testing.T) {
	src, d, _ := openMySQLDB(t)
	dst, _, _ := openMySQLDB(t)
	ctx := t.Context()
	execAll(t, src,
		"CREATE TABLE bands (id int NOT NULL AUTO_INCREMENT PRIMARY KEY,"+
			" name varchar(64) NOT NULL,"+
			" code varchar(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"+
			" legacy char(8) CHARACTER SET latin1 COLLATE latin1_swedish_ci,"+
			" doc json) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci")
	def, err := d.ReadTable(ctx, src, []string{"bands"})
	if err != nil {
		t.Fatal(err)
	}
	if def.Charset != "utf8mb4" || def.Collation != "utf8mb4_general_ci" || def.StorageEngine != "MyISAM" {
		t.Errorf("read: charset %q, collation %q, engine %q; want utf8mb4, utf8mb4_general_ci, MyISAM", def.Charset, def.Collation, def.StorageEngine)
	}
	cr := d.Create(mapDef(t, def, plans.MySQL, plans.MySQL), "_fence")
	if len(cr.Notes) != 1 || !strings.Contains(cr.Notes[0], "MyISAM") {
		t.Errorf("notes %q, want the MyISAM engine's", cr.Notes)
	}
	execAll(t, dst, cr.Table)
	q := `SELECT CONCAT(column_name, ' ', COALESCE(character_set_name, '-'), ' ', COALESCE(collation_name, '-'))
FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'bands' AND column_name <> '_fence' ORDER BY ordinal_position`
	tq := "SELECT CONCAT(engine, ' ', table_collation) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'bands'"
	srcCols, dstCols := strings.Join(queryTexts(t, src, q), "; "), strings.Join(queryTexts(t, dst, q), "; ")
	if dstCols != srcCols {
		t.Errorf("target columns: %s\nwant the source's: %s", dstCols, srcCols)
	}
	if got := strings.Join(queryTexts(t, dst, tq), ""); got != "InnoDB utf8mb4_general_ci" {
		t.Errorf("target table: %s, want InnoDB utf8mb4_general_ci", got)
	}
	execAll(t, dst, "INSERT INTO bands (id, name, code) VALUES (1, 'AC/DC', 'P1')")
	var n int
	if err := dst.QueryRowContext(ctx, "SELECT COUNT(*) FROM bands WHERE name = 'ac/dc' AND code <> 'p1'").Scan(&n); err != nil || n != 1 {
		t.Errorf("case-insensitive name, case-sensitive code: %d rows (%v), want 1", n, err)
	}
}

// TestMySQL_SourceCounter: an emptied table's counter (989) is read with
// its definition, and the sequence step on the target's own definition,
// given it as the runner gives it, sets the target's counter to it even
// above the copied keys, and never lowers it.
func TestMySQL_SourceCounter(t *testing.T) {
	src, d, _ := openMySQLDB(t)
	dst, _, _ := openMySQLDB(t)
	ctx := t.Context()
	execAll(t, src, "CREATE TABLE tickets (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, note varchar(64))",
		"INSERT INTO tickets VALUES (988, 'the last')", "DELETE FROM tickets")
	def, err := d.ReadTable(ctx, src, []string{"tickets"})
	if err != nil {
		t.Fatal(err)
	}
	if def.Columns[0].Next != 989 {
		t.Errorf("read: next %d, want 989", def.Columns[0].Next)
	}
	execAll(t, dst, d.Create(mapDef(t, def, plans.MySQL, plans.MySQL), "_fence").Table, "INSERT INTO tickets (id, note) VALUES (1, 'copied')")
	reset := func() {
		own, err := d.ReadTable(ctx, dst, []string{"tickets"})
		if err != nil {
			t.Fatal(err)
		}
		own.Columns[0].Next = max(own.Columns[0].Next, def.Columns[0].Next)
		for _, s := range d.SequenceSteps(own) {
			runStep(t, dst, s)
		}
	}
	reset()
	if got := autoIncrement(t, dst, "tickets"); got != 989 {
		t.Errorf("target counter %d, want the source's 989", got)
	}
	execAll(t, dst, "ALTER TABLE tickets AUTO_INCREMENT = 2000")
	reset()
	if got := autoIncrement(t, dst, "tickets"); got != 2000 {
		t.Errorf("target counter %d after the step, want 2000 kept", got)
	}
}

// queryTexts returns the first column of every row of q.
func queryTexts(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
