package dialect

import "github.com/migrate-dev/migrate/plans"

// goldenSequencesDef is a PostgreSQL table (issue 25, items 7 and 8)
// whose key default is nextval() of a sequence no column owns, mixed-case
// in another schema, with its own type, increment, bounds and cycle; a
// column not in the key with another such default, and one using a
// sequence in an expression; partitioned, one partition declaring an
// index, a unique constraint and a foreign key of its own, another a
// foreign key of the same name, a third a primary key (as a partition of
// a table without one may). Toward MySQL its types are mapped.
func goldenSequencesDef(d Dialect) *TableDef {
	typ := func(pg, my string) string {
		if d.Engine() == plans.MySQL {
			return my
		}
		return pg
	}
	col := func(name, t string, notNull bool) ColumnDef {
		return ColumnDef{Column: Column{Name: name, Type: t, Base: t, NotNull: notNull}}
	}
	seqs := []Sequence{
		{Name: []string{"Stock", "Item_Seq"}, Ref: `"Stock"."Item_Seq"`, Type: "integer", Start: 3, Increment: 5, Min: 3, Max: 1000000, Cache: 1, Cycle: true},
		{Name: []string{"public", "ref's_seq"}, Ref: `"ref's_seq"`, Type: "bigint", Start: 1, Increment: 1, Min: 1, Max: 9223372036854775807, Cache: 20},
	}
	cols := []ColumnDef{
		col("id", typ("integer", "int"), true),
		col("at", "date", true),
		col("ref", "bigint", false),
		col("code", typ("text", "longtext"), false),
		col("item", typ("integer", "int"), true),
	}
	cols[0].Default = Default{Kind: DefaultExpr, Expr: `nextval('"Stock"."Item_Seq"'::regclass)`}
	cols[0].Sequence = seqs[0].Name
	cols[2].Default = Default{Kind: DefaultExpr, Expr: `nextval('"ref''s_seq"'::regclass)`}
	cols[2].Sequence = seqs[1].Name
	cols[3].Default = Default{Kind: DefaultExpr, Expr: `('R-'::text || nextval('"ref''s_seq"'::regclass))`}
	return &TableDef{
		Engine:      plans.Postgres,
		Name:        []string{"public", "Moves"},
		Columns:     cols,
		PrimaryKey:  &Index{Name: "Moves_pkey", Unique: true, Constraint: true, Method: "btree", Parts: []IndexPart{{Column: "id"}, {Column: "at"}}},
		PartitionBy: "RANGE (at)",
		Partitions: []Partition{
			{Name: []string{"public", "moves_2024"}, Bound: "FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')",
				Indexes: []Index{
					{Name: "moves_2024_item", Method: "btree", Parts: []IndexPart{{Column: "item"}}},
					{Name: "moves_2024_ref_key", Unique: true, Constraint: true, Method: "btree", Parts: []IndexPart{{Column: "ref"}}},
				},
				ForeignKeys: []ForeignKey{{Name: "moves_item_fk", Columns: []string{"item"}, RefTable: []string{"public", "Items"}, RefColumns: []string{"id"},
					OnDelete: "NO ACTION", OnUpdate: "NO ACTION", Def: `FOREIGN KEY (item) REFERENCES "Items"(id)`}}},
			{Name: []string{"public", "moves_2025"}, Bound: "FOR VALUES FROM ('2025-01-01') TO ('2026-01-01')",
				ForeignKeys: []ForeignKey{{Name: "moves_item_fk", Columns: []string{"item"}, RefTable: []string{"public", "Items"}, RefColumns: []string{"id"},
					OnDelete: "CASCADE", OnUpdate: "NO ACTION", Def: `FOREIGN KEY (item) REFERENCES "Items"(id) ON DELETE CASCADE`}}},
			{Name: []string{"public", "moves_rest"}, Bound: "DEFAULT",
				PrimaryKey: &Index{Name: "moves_rest_pkey", Unique: true, Constraint: true, Method: "btree", Parts: []IndexPart{{Column: "id"}}}},
		},
		Sequences: seqs,
	}
}

func init() {
	goldenCases = append(goldenCases,
		goldenCase{"Create", "unowned sequences, partitions' own keys", func(d Dialect, _ fixture) string {
			return mysqlGoldenCreated(d.Create(goldenSequencesDef(d), gFence))
		}},
		goldenCase{"SequenceSteps", "unowned sequences", func(d Dialect, _ fixture) string {
			return mysqlGoldenSteps(d.SequenceSteps(goldenSequencesDef(d)))
		}},
	)
}
