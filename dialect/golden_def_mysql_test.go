package dialect

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// mysqlGoldenDef is a MySQL table's definition as MySQL.ReadTable gives
// it (MariaDB's spellings; column types mapped as a same-engine run maps
// them): AUTO_INCREMENT, ENUM and SET with quotes and backslashes,
// literal, current-time and expression defaults, ON UPDATE, generated
// columns, comments, unique, composite descending, prefix, FULLTEXT and
// HASH indexes, a composite foreign key and one to another database,
// checks, a table comment.
func mysqlGoldenDef() *TableDef {
	col := func(name, typ, base string, notNull bool) ColumnDef {
		return ColumnDef{Column: Column{Name: name, Type: typ, Base: base, NotNull: notNull}}
	}
	lit := func(v, expr string) Default { return Default{Kind: DefaultLiteral, Value: v, Expr: expr} }
	cols := []ColumnDef{
		col("Id", "int unsigned", "int", true),
		col("Status", `enum('Active','in''active','a\\b')`, "enum", true),
		col("flags", "set('X','y')", "set", false),
		col("born", "year(4)", "year", false),
		col("created_at", "timestamp(6)", "timestamp", true),
		col("updated_at", "datetime", "datetime", true),
		col("note", "varchar(50)", "varchar", false),
		col("opened", "date", "date", false),
		col("price", "decimal(8,2)", "decimal", false),
		col("total", "decimal(12,2)", "decimal", false),
		col("email_lc", "varchar(190)", "varchar", false),
		col("Body Text", "text", "text", false),
		col("doc", "longtext", "json", false),
		col("order_id", "int", "int", false),
		col("line", "smallint", "smallint", false),
		col("parent_id", "int unsigned", "int", false),
	}
	cols[0].Identity = AutoIncrement
	cols[1].Values = []string{"Active", "in'active", `a\b`}
	cols[1].Default = lit("Active", "'Active'")
	cols[1].Comment = "the account's status"
	cols[2].Values = []string{"X", "y"}
	cols[2].Default = lit("X,y", "'X,y'")
	cols[3].Default = lit("2000", "2000")
	cols[4].Default = Default{Kind: DefaultNow, Expr: "current_timestamp(6)"}
	cols[5].Default = Default{Kind: DefaultNow, Expr: "current_timestamp()"}
	cols[5].OnUpdate = "current_timestamp()"
	cols[6].Default = lit(`it's a \ b`, `'it''s a \\ b'`)
	cols[7].Default = Default{Kind: DefaultExpr, Expr: "curdate()"}
	cols[8].Default = lit("9.99", "9.99")
	cols[9].Generated, cols[9].Stored = "`price` * 2", true
	cols[10].Generated = "lcase(`note`)"
	cols[11].Default = lit("", "''")
	return &TableDef{
		Engine:     plans.MySQL,
		Name:       []string{"Order`s"},
		Columns:    cols,
		PrimaryKey: &Index{Name: "PRIMARY", Unique: true, Method: "btree", Parts: []IndexPart{{Column: "Id"}}},
		Indexes: []Index{
			{Name: "uq_note", Unique: true, Method: "btree", Parts: []IndexPart{{Column: "note"}}},
			{Name: "ix_comp", Method: "btree", Parts: []IndexPart{{Column: "price"}, {Column: "created_at", Desc: true}}},
			{Name: "ix_pref", Method: "btree", Parts: []IndexPart{{Column: "Body Text", Prefix: 10}}},
			{Name: "ft_body", Method: "fulltext", Parts: []IndexPart{{Column: "Body Text"}}},
			{Name: "ix_hash", Method: "hash", Parts: []IndexPart{{Column: "email_lc"}}},
		},
		ForeignKeys: []ForeignKey{
			{Name: "lines_fk", Columns: []string{"order_id", "line"}, RefTable: []string{"Order Lines"}, RefColumns: []string{"order_id", "line"}, OnDelete: "CASCADE", OnUpdate: "RESTRICT"},
			{Name: "parent_fk", Columns: []string{"parent_id"}, RefTable: []string{"crm", "accounts"}, RefColumns: []string{"id"}, OnDelete: "SET NULL", OnUpdate: "CASCADE"},
		},
		Checks:  []Check{{Name: "chk_price", Expr: "`price` >= 0"}, {Name: "price", Expr: "`price` < 1000"}},
		Comment: "the shop's orders",
	}
}

// mysqlGoldenCreated renders a Created: its statements, each step with
// its Exists (or Value) and their arguments, what is skipped and noted.
func mysqlGoldenCreated(c Created) string {
	var b strings.Builder
	for _, s := range c.Before {
		b.WriteString("before: " + s + ";\n")
	}
	b.WriteString(stmt(c.Table) + ";\n")
	for _, s := range c.After {
		b.WriteString("after: " + s + ";\n")
	}
	b.WriteString(mysqlGoldenSteps(append(c.Indexes, c.ForeignKeys...)))
	if len(c.Skipped) > 0 {
		fmt.Fprintf(&b, "\nskipped: %s", strings.Join(c.Skipped, ", "))
	}
	for _, n := range c.Notes {
		b.WriteString("\nnote: " + n)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func mysqlGoldenSteps(steps []Step) string {
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "step %s %s %s: %s;\n", s.Kind, strings.Join(s.Table, "."), s.Name, s.SQL)
		if s.Exists != "" {
			fmt.Fprintf(&b, "  exists: %s\n  args: %s\n", s.Exists, values(s.ExistsArgs))
		}
		if s.Value != "" {
			fmt.Fprintf(&b, "  value: %s\n  args: %s\n", s.Value, values(s.ValueArgs))
		}
	}
	if len(steps) == 0 {
		return "no steps"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// mysqlGoldenEvents has its AUTO_INCREMENT column second in the key, a
// partition clause, and a name in another database.
func mysqlGoldenEvents() *TableDef {
	return &TableDef{
		Engine: plans.MySQL,
		Name:   []string{"Log", "events"},
		Columns: []ColumnDef{
			{Column: Column{Name: "tenant", Type: "int", Base: "int", NotNull: true}},
			{Column: Column{Name: "seq", Type: "bigint", Base: "bigint", NotNull: true}, Identity: AutoIncrement},
		},
		PrimaryKey:  &Index{Name: "PRIMARY", Unique: true, Method: "btree", Parts: []IndexPart{{Column: "tenant"}, {Column: "seq"}}},
		Indexes:     []Index{{Name: "ix_seq", Method: "btree", Parts: []IndexPart{{Column: "seq"}}}},
		PartitionBy: "PARTITION BY HASH (`tenant`)\nPARTITIONS 4",
	}
}

// mysqlGoldenFromPostgres is a PostgreSQL definition, types mapped to
// MySQL's: identities, a boolean, a current-time and an expression
// default, a generated column, a partial unique, an expression, a gin
// index and an index on text, a check, a foreign key with SET DEFAULT, a
// partition key, a domain.
func mysqlGoldenFromPostgres() *TableDef {
	col := func(name, typ, base string, notNull bool) ColumnDef {
		return ColumnDef{Column: Column{Name: name, Type: typ, Base: base, NotNull: notNull}}
	}
	cols := []ColumnDef{
		col("id", "bigint", "bigint", true),
		col("n", "int", "int", true),
		col("active", "tinyint(1)", "tinyint", true),
		col("created", "datetime(6)", "datetime", true),
		col("day", "date", "date", false),
		col("body", "longtext", "longtext", false),
		col("a", "int", "int", false),
		col("doubled", "int", "int", false),
		col("doc", "json", "json", false),
		col("tag_id", "int", "int", false),
	}
	cols[0].Identity = IdentityAlways
	cols[1].Identity = IdentitySerial
	cols[2].Default = Default{Kind: DefaultLiteral, Value: "true", Expr: "true"}
	cols[3].Default = Default{Kind: DefaultNow, Expr: "now()"}
	cols[4].Default = Default{Kind: DefaultExpr, Expr: "CURRENT_DATE"}
	cols[5].Default = Default{Kind: DefaultLiteral, Value: "none", Expr: "'none'::text"}
	cols[5].Comment = "free text"
	cols[7].Generated, cols[7].Stored = "(a * 2)", true
	long := strings.Repeat("x", 60)
	return &TableDef{
		Engine:     plans.Postgres,
		Name:       []string{"items"},
		Columns:    cols,
		PrimaryKey: &Index{Name: "items_pkey", Unique: true, Constraint: true, Method: "btree", Parts: []IndexPart{{Column: "id"}}},
		Indexes: []Index{
			{Name: "items_body_live", Unique: true, Method: "btree", Parts: []IndexPart{{Column: "body"}}, Where: "(a > 0)"},
			{Name: "items_lower", Method: "btree", Parts: []IndexPart{{Expr: "lower(body)"}}},
			{Name: "items_doc", Method: "gin", Parts: []IndexPart{{Column: "doc"}}},
			{Name: "items_body", Method: "btree", Parts: []IndexPart{{Column: "body"}, {Column: "a", Desc: true}}},
			{Name: "items_a_key", Unique: true, Constraint: true, Method: "btree", Parts: []IndexPart{{Column: "a"}}},
		},
		ForeignKeys: []ForeignKey{{Name: long, Columns: []string{"tag_id"}, RefTable: []string{"tags"}, RefColumns: []string{"id"}, OnDelete: "SET DEFAULT", OnUpdate: "NO ACTION"}},
		Checks:      []Check{{Name: "items_a_check", Expr: "(a > 0)"}},
		PartitionBy: "RANGE (created)",
		Partitions:  []Partition{{Name: []string{"public", "items_2024"}, Bound: "FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')"}},
		Types:       []UserType{{Name: []string{"public", "qty"}, Kind: "domain", Create: "CREATE DOMAIN qty AS integer"}},
	}
}

// mysqlGoldenCollated is a MySQL table with its own default collation, a
// case-insensitive one, text columns of other collations and character
// sets, MariaDB's JSON (utf8mb4_bin), an Aria engine, and an
// AUTO_INCREMENT counter (989) above its rows.
func mysqlGoldenCollated() *TableDef {
	col := func(name, typ, base, charset, collation string) ColumnDef {
		return ColumnDef{Column: Column{Name: name, Type: typ, Base: base}, Charset: charset, Collation: collation}
	}
	cols := []ColumnDef{
		col("id", "int", "int", "", ""),
		col("name", "varchar(64)", "varchar", "utf8mb4", "utf8mb4_general_ci"),
		col("code", "varchar(16)", "varchar", "utf8mb4", "utf8mb4_unicode_ci"),
		col("legacy", "char(8)", "char", "latin1", "latin1_swedish_ci"),
		col("grade", "enum('a','A')", "enum", "utf8mb4", "utf8mb4_bin"),
		col("doc", "longtext", "json", "utf8mb4", "utf8mb4_bin"),
	}
	cols[0].NotNull, cols[0].Identity, cols[0].Next = true, AutoIncrement, 989
	cols[4].Values = []string{"a", "A"}
	return &TableDef{
		Engine: plans.MySQL, Name: []string{"Bands"}, Columns: cols,
		PrimaryKey: &Index{Name: "PRIMARY", Unique: true, Method: "btree", Parts: []IndexPart{{Column: "id"}}},
		Indexes:    []Index{{Name: "uq_code", Unique: true, Method: "btree", Parts: []IndexPart{{Column: "code"}}}},
		Charset:    "utf8mb4", Collation: "utf8mb4_general_ci", StorageEngine: "Aria",
	}
}

func init() {
	goldenCases = append(goldenCases,
		goldenCase{"Create", "my: collations, Aria, AUTO_INCREMENT 989", func(d Dialect, _ fixture) string {
			return mysqlGoldenCreated(d.Create(mysqlGoldenCollated(), gFence))
		}},
		goldenCase{"SequenceSteps", "my: the source's AUTO_INCREMENT 989", func(d Dialect, _ fixture) string {
			return mysqlGoldenSteps(d.SequenceSteps(mysqlGoldenCollated()))
		}},
		goldenCase{"Create", "my: MySQL def", func(d Dialect, _ fixture) string { return mysqlGoldenCreated(d.Create(mysqlGoldenDef(), gFence)) }},
		goldenCase{"Create", "my: AUTO_INCREMENT second in the key, partitioned", func(d Dialect, _ fixture) string {
			return mysqlGoldenCreated(d.Create(mysqlGoldenEvents(), gOwnFence))
		}},
		goldenCase{"Create", "my: PostgreSQL def, mapped to MySQL types", func(d Dialect, _ fixture) string {
			return mysqlGoldenCreated(d.Create(mysqlGoldenFromPostgres(), gFence))
		}},
		goldenCase{"ForeignKeySteps", "my: MySQL def", func(d Dialect, _ fixture) string { return mysqlGoldenSteps(d.ForeignKeySteps(mysqlGoldenDef())) }},
		goldenCase{"SequenceSteps", "my: MySQL def", func(d Dialect, _ fixture) string { return mysqlGoldenSteps(d.SequenceSteps(mysqlGoldenEvents())) }},
		goldenCase{"DropForeignKey", "my: schema-qualified", func(d Dialect, _ fixture) string { return d.DropForeignKey(gQual, "lines`fk") }},
	)
}

// The MySQL literal and expression helpers of Definitions.
func TestMySQL_DefHelpers(t *testing.T) {
	if got := mysqlMembers(`enum('Active','in''active','a\\b','x,y','(p)','')`); !slices.Equal(got, []string{"Active", "in'active", `a\b`, "x,y", "(p)", ""}) {
		t.Errorf("members %q", got)
	}
	if got := mysqlUnquote(`'it''s a \\ b'`); got != `it's a \ b` {
		t.Errorf("unquote %q", got)
	}
	if got := typemap.MySQLString("it's a \\ b\x00"); got != `'it''s a \\ b\0'` {
		t.Errorf("string literal %s", got)
	}
	my8, maria := mysqlFor("8.0.36"), mysqlFor("10.11.6-MariaDB")
	if got := my8.catalogExpr(`concat(_utf8mb4\'a\',` + "`b`" + `)`); got != "concat(_utf8mb4'a',`b`)" {
		t.Errorf("MySQL 8 expression %s", got)
	}
	if got := maria.catalogExpr(`'a\'b'`); got != `'a\'b'` {
		t.Errorf("MariaDB expression changed: %s", got)
	}
	for in, want := range map[string]string{"a > 0": "(a > 0)", "(a > 0)": "(a > 0)", "(a) + (b)": "((a) + (b))", "(')')": "(')')", "curdate()": "(curdate())"} {
		if got := parenthesized(in); got != want {
			t.Errorf("parenthesized(%s) = %s, want %s", in, got, want)
		}
	}
	if got := mysqlUniqueName(strings.Repeat("t", 61), "é_fk"); len(got) > 64 || got != strings.Repeat("t", 61)+"_é" {
		t.Errorf("unique name %q (%d bytes)", got, len(got))
	}
}
