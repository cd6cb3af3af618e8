package dialect

import (
	"strings"

	"github.com/migrate-dev/migrate/plans"
)

// pgGoldenDef is a PostgreSQL table's definition as Postgres.ReadTable
// gives it: serial and identity columns, an enum and a domain over it, a
// composite type, literal (with a quote and a backslash), current-time
// and expression defaults, a generated column, comments, a named primary
// key, a unique constraint, partial, expression, descending and hash
// indexes, composite and self-referencing foreign keys, a check, a range
// partition key with two partitions, mixed-case names.
func pgGoldenDef() *TableDef {
	col := func(name, typ, base string, notNull bool) ColumnDef {
		return ColumnDef{Column: Column{Name: name, Type: typ, Base: base, NotNull: notNull}}
	}
	cols := []ColumnDef{
		col("id", "integer", "integer", true),
		col("Seq", "bigint", "bigint", true),
		col("line", "smallint", "smallint", true),
		col("mood", "mood", "enum", true),
		col("feel", "feeling", "mood", false),
		col("home", "address", "address", false),
		col("Full Name", "character varying(100)", "character varying", false),
		col("created", "timestamp with time zone", "timestamp with time zone", true),
		col("due", "date", "date", false),
		col("email", "text", "text", true),
		col("lower_email", "text", "text", false),
		col("parent", "integer", "integer", false),
		col("region", "text", "text", false),
		col("no", "integer", "integer", false),
	}
	cols[0].Identity = IdentitySerial
	cols[1].Identity = IdentityAlways
	cols[2].Identity = IdentityByDefault
	cols[3].Values = []string{"sad", "ok", "it's"}
	cols[3].Default = Default{Kind: DefaultLiteral, Value: "ok", Expr: "'ok'::mood"}
	cols[6].Default = Default{Kind: DefaultLiteral, Value: `it's a \ b`, Expr: `'it''s a \ b'::character varying`}
	cols[6].Comment = `the "name", it's`
	cols[7].Default = Default{Kind: DefaultNow, Expr: "now()"}
	cols[8].Default = Default{Kind: DefaultExpr, Expr: "(CURRENT_DATE + 7)"}
	cols[10].Generated, cols[10].Stored = "lower(email)", true
	return &TableDef{
		Engine:     plans.Postgres,
		Name:       []string{"Sales", "Orders"},
		Columns:    cols,
		PrimaryKey: &Index{Name: "Orders_pkey", Unique: true, Constraint: true, Method: "btree", Parts: []IndexPart{{Column: "id"}, {Column: "created"}}},
		Indexes: []Index{
			{Name: "orders_region_no", Unique: true, Constraint: true, Method: "btree", Parts: []IndexPart{{Column: "region"}, {Column: "no"}}},
			{Name: "orders_email", Unique: true, Method: "btree", Parts: []IndexPart{{Expr: "lower(email)"}}},
			{Name: "orders_live", Method: "btree", Parts: []IndexPart{{Column: "created", Desc: true}, {Column: "id"}}, Where: "(mood <> 'sad'::mood)"},
			{Name: "orders_hash", Method: "hash", Parts: []IndexPart{{Column: "email"}}},
		},
		ForeignKeys: []ForeignKey{
			{Name: "orders_parent_fkey", Columns: []string{"parent", "created"}, RefTable: []string{"Sales", "Orders"}, RefColumns: []string{"id", "created"}, OnDelete: "SET NULL", OnUpdate: "NO ACTION",
				Def: `FOREIGN KEY (parent, created) REFERENCES "Sales"."Orders"(id, created) ON DELETE SET NULL`},
			{Name: "orders_region_fk", Columns: []string{"region", "no"}, RefTable: []string{"Sales", "Regions"}, RefColumns: []string{"region", "no"}, OnDelete: "CASCADE", OnUpdate: "RESTRICT",
				Def: `FOREIGN KEY (region, no) REFERENCES "Sales"."Regions"(region, no) ON UPDATE RESTRICT ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED`},
		},
		Checks:      []Check{{Name: "orders_no_check", Expr: "(no > 0)"}},
		Comment:     "who buys: it's them",
		PartitionBy: "RANGE (created)",
		Partitions: []Partition{
			{Name: []string{"Sales", "orders_2024"}, Bound: "FOR VALUES FROM ('2024-01-01 00:00:00+00') TO ('2025-01-01 00:00:00+00')"},
			{Name: []string{"Sales", "orders_rest"}, Bound: "DEFAULT"},
		},
		Types: []UserType{
			{Name: []string{"public", "mood"}, Kind: "enum", Create: pgDoOnce(`CREATE TYPE public.mood AS ENUM ('sad', 'ok', 'it''s')`)},
			{Name: []string{"public", "feeling"}, Kind: "domain", Create: pgDoOnce(`CREATE DOMAIN public.feeling AS mood DEFAULT 'ok'::mood NOT NULL`)},
			{Name: []string{"public", "address"}, Kind: "composite", Create: pgDoOnce(`CREATE TYPE public.address AS (street text, zip character varying(10))`)},
		},
	}
}

// pgGoldenFromMySQL is a MySQL table's definition, its types mapped to
// PostgreSQL's: AUTO_INCREMENT, ENUM and SET (members with a quote and a
// backslash), a tinyint(1) default 1 on a boolean, CURRENT_TIMESTAMP with
// ON UPDATE, expression defaults with and without a translation, stored,
// virtual and untranslatable generated columns, checks with and without a
// translation, FULLTEXT, prefix, descending and functional indexes, a
// partition clause.
func pgGoldenFromMySQL() *TableDef {
	col := func(name, typ string, notNull bool) ColumnDef {
		return ColumnDef{Column: Column{Name: name, Type: typ, Base: strings.SplitN(typ, "(", 2)[0], NotNull: notNull}}
	}
	cols := []ColumnDef{
		col("Id", "bigint", true),
		col("status", "text", true),
		col("flags", "text", false),
		col("active", "boolean", true),
		col("created", "timestamptz(0)", true),
		col("updated", "timestamp(0)", true),
		col("opened", "date", false),
		col("qty", "integer", true),
		col("price", "numeric(8,2)", false),
		col("total", "numeric(12,2)", false),
		col("lc", "varchar(50)", false),
		col("odd", "integer", false),
		col("Body", "text", false),
	}
	cols[0].Identity = AutoIncrement
	cols[1].Values = []string{"new", "it's", `a\b`}
	cols[1].Default = Default{Kind: DefaultLiteral, Value: "new", Expr: "'new'"}
	cols[2].Type, cols[2].Values = "set('x','y')", []string{"x", "y"} // as a plan's types override could leave it
	cols[3].Default = Default{Kind: DefaultLiteral, Value: "1", Expr: "1"}
	cols[4].Default = Default{Kind: DefaultNow, Expr: "current_timestamp()"}
	cols[5].Default = Default{Kind: DefaultNow, Expr: "current_timestamp()"}
	cols[5].OnUpdate = "current_timestamp()"
	cols[6].Default = Default{Kind: DefaultExpr, Expr: "curdate()"}
	cols[7].Default = Default{Kind: DefaultLiteral, Value: "1", Expr: "1"}
	cols[8].Default = Default{Kind: DefaultExpr, Expr: "rand()"}
	cols[9].Generated, cols[9].Stored = "`price` * `qty`", true
	cols[10].Generated = "lower(`Body`)"
	cols[11].Generated = "if(`qty` > 1, 1, 0)"
	cols[12].Comment = `it's a \ comment`
	return &TableDef{
		Engine:     plans.MySQL,
		Name:       []string{"shop", "Order Items"},
		Columns:    cols,
		PrimaryKey: &Index{Name: "PRIMARY", Unique: true, Method: "btree", Parts: []IndexPart{{Column: "Id"}}},
		Indexes: []Index{
			{Name: "ft_body", Method: "fulltext", Parts: []IndexPart{{Column: "Body"}}},
			{Name: "ix_body", Unique: true, Method: "btree", Parts: []IndexPart{{Column: "Body", Prefix: 10}}},
			{Name: "ix_comp", Method: "btree", Parts: []IndexPart{{Column: "qty"}, {Column: "created", Desc: true}}},
			{Name: "ix_lower", Method: "btree", Parts: []IndexPart{{Expr: "lower(`lc`)"}}},
			{Name: "ix_odd", Method: "btree", Parts: []IndexPart{{Column: "odd"}}},
			{Name: strings.Repeat("i", 60), Method: "hash", Parts: []IndexPart{{Column: "price"}}},
		},
		ForeignKeys: []ForeignKey{{Name: "items_order_fk", Columns: []string{"Id"}, RefTable: []string{"shop", "Orders"}, RefColumns: []string{"id"}, OnDelete: "CASCADE", OnUpdate: "RESTRICT"}},
		Checks:      []Check{{Name: "qty_positive", Expr: "`qty` > 0"}, {Name: "CONSTRAINT_1", Expr: "`price` div 2 < 100"}},
		Comment:     "the shop's items",
		PartitionBy: "PARTITION BY HASH (`Id`)\nPARTITIONS 4",
	}
}

// goldenDefSame is a definition of d's own engine, goldenDefCross one of
// the other engine with its types mapped to d's.
func goldenDefSame(d Dialect) *TableDef {
	if d.Engine() == plans.Postgres {
		return pgGoldenDef()
	}
	return mysqlGoldenDef()
}

func goldenDefCross(d Dialect) *TableDef {
	if d.Engine() == plans.Postgres {
		return pgGoldenFromMySQL()
	}
	return mysqlGoldenFromPostgres()
}

func init() {
	goldenCases = append(goldenCases,
		goldenCase{"Create", "pg: same engine", func(d Dialect, _ fixture) string { return mysqlGoldenCreated(d.Create(goldenDefSame(d), gFence)) }},
		goldenCase{"Create", "pg: other engine, types mapped", func(d Dialect, _ fixture) string {
			return mysqlGoldenCreated(d.Create(goldenDefCross(d), gOwnFence))
		}},
		goldenCase{"ForeignKeySteps", "pg: same engine", func(d Dialect, _ fixture) string { return mysqlGoldenSteps(d.ForeignKeySteps(goldenDefSame(d))) }},
		goldenCase{"SequenceSteps", "pg: same engine", func(d Dialect, _ fixture) string { return mysqlGoldenSteps(d.SequenceSteps(goldenDefSame(d))) }},
		goldenCase{"DropForeignKey", "pg: unqualified", func(d Dialect, _ fixture) string { return d.DropForeignKey(gTable, `orders"fk`) }},
	)
}
