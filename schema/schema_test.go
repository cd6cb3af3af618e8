package schema_test

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/schema"
)

// each runs fn against a fresh database of every engine.
func each(t *testing.T, fn func(t *testing.T, db *sql.DB, d dialect.Dialect)) {
	for _, e := range testsvc.Engines {
		t.Run(e.Name, func(t *testing.T) {
			dsn, err := plans.ParseDSN(e.NewDB(t))
			if err != nil {
				t.Fatal(err)
			}
			d, _ := dialect.For(dsn.Engine())
			db, d, err := dialect.Open(t.Context(), d, dsn, dialect.Session{RawTimes: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			fn(t, db, d)
		})
	}
}

func exec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// A source table passes the key checks only with a NOT NULL, unique key;
// the copied columns leave out the fence column.
func TestSourceColumns(t *testing.T) {
	each(t, func(t *testing.T, db *sql.DB, d dialect.Dialect) {
		q := d.Quote
		exec(t, db, "CREATE TABLE "+q("Orders")+" (id bigint NOT NULL, "+q("Region")+" varchar(10) NOT NULL, note varchar(20), _fence bigint, PRIMARY KEY (id, "+q("Region")+"))")
		tb := plans.Table{Name: "Orders", Target: "Orders", Key: []string{"id", "Region"}}
		cols, err := schema.SourceColumns(t.Context(), db, d, tb, "_fence")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range cols {
			names = append(names, c.Name)
		}
		if strings.Join(names, ",") != "id,Region,note" {
			t.Errorf("copied columns %v, want id,Region,note", names)
		}
		for _, c := range []struct {
			table plans.Table
			want  string
		}{
			{plans.Table{Name: "Missing", Key: []string{"id"}}, "does not exist"},
			{plans.Table{Name: "Orders", Key: []string{"nope"}}, `has no key column "nope"`},
			{plans.Table{Name: "Orders", Key: []string{"note"}}, "may be NULL"},
			{plans.Table{Name: "Orders", Key: []string{"Region"}}, "no unique index or primary key within the key"},
			{plans.Table{Name: "Orders", Key: []string{"id"}, Columns: []string{"id", "gone"}}, `has no column "gone"`},
		} {
			_, err := schema.SourceColumns(t.Context(), db, d, c.table, "_fence")
			if !errors.Is(err, plans.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: %v, want ErrInvalid saying %q", c.table, err, c.want)
			}
		}
	})
}

// An existing target needs a unique index on exactly the key, and where
// the upsert matches any unique index (MySQL), no other; a missing one is
// created with the fence column.
func TestTarget_Prepare(t *testing.T) {
	each(t, func(t *testing.T, db *sql.DB, d dialect.Dialect) {
		q := d.Quote
		tg := schema.Target{SQL: d, Source: d.Engine(), FenceColumn: "_fence"}
		src := []dialect.Column{{Name: "id", Type: "bigint", Base: "bigint", NotNull: true}, {Name: "email", Type: "varchar(50)", Base: "varchar"}}
		def := &dialect.TableDef{Engine: d.Engine(), Name: []string{"users"},
			Columns:    []dialect.ColumnDef{{Column: src[0]}, {Column: src[1]}},
			PrimaryKey: &dialect.Index{Unique: true, Constraint: true, Parts: []dialect.IndexPart{{Column: "id"}}}}
		tb := plans.Table{Name: "users", Target: "users", Key: []string{"id"}}
		p, err := tg.Prepare(t.Context(), db, tb, src, def)
		if err != nil || !p.Created || len(p.DDL) != 1 || !strings.HasPrefix(p.DDL[0], "CREATE TABLE") || !strings.Contains(p.DDL[0], "_fence") {
			t.Fatalf("missing table: %+v, %v", p, err)
		}
		exec(t, db, p.DDL[0])
		if p, err := tg.Prepare(t.Context(), db, tb, src, def); err != nil || p.Created || len(p.DDL) != 0 {
			t.Errorf("the created table: %+v, %v; want nothing to do", p, err)
		}
		exec(t, db, "CREATE UNIQUE INDEX by_email ON "+q("users")+" (email)")
		_, err = tg.Prepare(t.Context(), db, tb, src, def)
		if d.UpsertMatchesAnyUnique() != (err != nil) {
			t.Errorf("a second unique index, upsert matching any %v: %v", d.UpsertMatchesAnyUnique(), err)
		}
		tg.Recorded = map[string]map[string]bool{"users": {"by_email": true}}
		if _, err = tg.Prepare(t.Context(), db, tb, src, def); err != nil {
			t.Errorf("a second unique index the plan's post-load created: %v", err)
		}
		exec(t, db, "CREATE TABLE "+q("nokey")+" (id bigint NOT NULL, email varchar(50))")
		_, err = tg.Prepare(t.Context(), db, plans.Table{Name: "nokey", Target: "nokey", Key: []string{"id"}}, src, def)
		if !errors.Is(err, plans.ErrInvalid) || !strings.Contains(err.Error(), "no unique index on exactly the key") {
			t.Errorf("no unique key: %v", err)
		}
	})
}

// Shard bounds split at quantiles of the first key column, so skewed keys
// give shards of about the same number of rows.
func TestShardBounds(t *testing.T) {
	each(t, func(t *testing.T, db *sql.DB, d dialect.Dialect) {
		exec(t, db, "CREATE TABLE skew (id bigint PRIMARY KEY)")
		var vals []string
		for i := 1; i <= 90; i++ {
			vals = append(vals, fmt.Sprint(i))
		}
		for i := 1; i <= 10; i++ {
			vals = append(vals, fmt.Sprint(1000000+i))
		}
		exec(t, db, "INSERT INTO skew VALUES ("+strings.Join(vals, "), (")+")")
		b, err := schema.ShardBounds(t.Context(), db, d, plans.Table{Name: "skew", Key: []string{"id"}, Shards: 4}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(b); got != "[{<nil> 25} {25 50} {50 75} {75 <nil>}]" {
			t.Errorf("bounds %s", got)
		}
	})
}

// shards: auto chooses the count from the rows (a shard per
// AutoShardRows, at most two per core), splits string keys too, and
// leaves out the empty shards of a first key column with few values.
func TestShardBounds_Auto(t *testing.T) {
	defer schema.SetAutoShardRows(25)()
	each(t, func(t *testing.T, db *sql.DB, d dialect.Dialect) {
		exec(t, db, "CREATE TABLE few (id bigint PRIMARY KEY)")
		exec(t, db, "INSERT INTO few VALUES (1), (2), (3)")
		auto := func(name string, key ...string) string {
			b, err := schema.ShardBounds(t.Context(), db, d, plans.Table{Name: name, Key: key, Shards: plans.ShardsAuto}, schema.AutoLimit(plans.MySQL, 2))
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(b)
		}
		if got := auto("few", "id"); got != "[{<nil> <nil>}]" {
			t.Errorf("3 rows: %s", got)
		}
		exec(t, db, "CREATE TABLE words (w varchar(10) NOT NULL PRIMARY KEY)")
		exec(t, db, "CREATE TABLE tenants (tenant int NOT NULL, id int NOT NULL, PRIMARY KEY (tenant, id))")
		var words, rows []string
		for i := 0; i < 100; i++ {
			words = append(words, fmt.Sprintf("'w%03d'", i))
			rows = append(rows, fmt.Sprintf("(%d, %d)", 1+i/70, i))
		}
		exec(t, db, "INSERT INTO words VALUES ("+strings.Join(words, "), (")+")")
		exec(t, db, "INSERT INTO tenants VALUES "+strings.Join(rows, ", "))
		// 100 rows, 25 a shard, 2 cores: 4 shards; into PostgreSQL, one.
		if n := schema.AutoShards(100, schema.AutoLimit(plans.Postgres, 2)); n != 1 {
			t.Errorf("auto into PostgreSQL: %d shards", n)
		}
		if got := auto("words", "w"); got != "[{<nil> w024} {w024 w049} {w049 w074} {w074 <nil>}]" {
			t.Errorf("string keys: %s", got)
		}
		// Tenant 1 holds rows 0..69: the bounds at rows 25, 50 are both 1.
		if got := auto("tenants", "tenant", "id"); got != "[{<nil> 1} {1 2} {2 <nil>}]" {
			t.Errorf("a first key column of two values: %s", got)
		}
	})
}

func TestDiffAndAlign(t *testing.T) {
	was := []dialect.Column{{Name: "a", Type: "int"}, {Name: "b", Type: "text"}, {Name: "c", Type: "int", NotNull: true}}
	now := []dialect.Column{{Name: "a", Type: "bigint"}, {Name: "c", Type: "int"}, {Name: "d", Type: "int"}}
	if got := schema.Diff(was, now); got != `column "a" changed type from int to bigint, column "c" changed nullability, column "d" added, column "b" dropped` {
		t.Errorf("Diff = %s", got)
	}
	if schema.Diff(was, was) != "" {
		t.Error("Diff of equal columns is not empty")
	}
	got, err := schema.Align(now, []dialect.Column{{Name: "d"}, {Name: "a"}})
	if err != nil || got[0].Name != "d" || got[1].Type != "bigint" {
		t.Errorf("Align = %v, %v", got, err)
	}
	if _, err := schema.Align(now, []dialect.Column{{Name: "b"}}); !errors.Is(err, plans.ErrInvalid) {
		t.Errorf("Align of a missing column: %v", err)
	}
}

// An existing target table whose key column compares by a collation under
// which distinct keys can be equal (case or accents ignored, PAD SPACE,
// a fixed-length character type) is refused, naming the column, its
// collation and the statement that makes it compare bytes — unless the
// source, of the same engine, gives its key column the same collation. A
// table migrate creates compares bytes, and so does a refused one once
// that statement has run.
func TestTarget_KeyCollations(t *testing.T) {
	each(t, func(t *testing.T, db *sql.DB, d dialect.Dialect) {
		ctx := t.Context()
		text := []dialect.Column{{Name: "w", Type: "text", Base: "text"}}
		other := plans.MySQL
		ci, bytewise := "utf8mb4_general_ci", "utf8mb4_nopad_bin"
		ddl := []string{
			"CREATE TABLE t_ci (w varchar(10) NOT NULL PRIMARY KEY) COLLATE utf8mb4_general_ci",
			"CREATE TABLE t_padbin (w varchar(10) NOT NULL PRIMARY KEY) COLLATE utf8mb4_bin",
			"CREATE TABLE t_char (w char(10) NOT NULL PRIMARY KEY) COLLATE " + bytewise,
			"CREATE TABLE t_bytes (w varchar(10) NOT NULL PRIMARY KEY) COLLATE " + bytewise,
			"CREATE TABLE t_int (w bigint NOT NULL PRIMARY KEY, v varchar(10)) COLLATE utf8mb4_general_ci",
			"CREATE TABLE s_ci (w varchar(10) NOT NULL PRIMARY KEY) COLLATE utf8mb4_general_ci",
			"CREATE TABLE s_bin (w varchar(10) NOT NULL PRIMARY KEY) COLLATE utf8mb4_bin",
		}
		if m, ok := d.(dialect.MySQL); ok && !m.MariaDB {
			bytewise = "utf8mb4_0900_bin"
			ddl[2], ddl[3] = strings.ReplaceAll(ddl[2], "utf8mb4_nopad_bin", bytewise), strings.ReplaceAll(ddl[3], "utf8mb4_nopad_bin", bytewise)
		}
		if d.Engine() == plans.Postgres {
			other, ci, bytewise = plans.MySQL, "ci", "default"
			exec(t, db, `CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`)
			ddl = []string{
				"CREATE TABLE t_ci (w text COLLATE ci PRIMARY KEY)",
				"CREATE TABLE t_padbin (w character(10) COLLATE \"C\" PRIMARY KEY)", // no PAD SPACE collation: character(n) is it
				"CREATE TABLE t_char (w character(10) PRIMARY KEY)",
				"CREATE TABLE t_bytes (w text PRIMARY KEY)",
				"CREATE TABLE t_int (w bigint PRIMARY KEY, v text COLLATE ci)",
				"CREATE TABLE s_ci (w text COLLATE ci PRIMARY KEY)",
				"CREATE TABLE s_bin (w text COLLATE \"C\" PRIMARY KEY)",
			}
		} else {
			other = plans.Postgres
		}
		for _, q := range ddl {
			exec(t, db, q)
		}
		if c, err := schema.Collations(ctx, db, d, []string{"t_bytes"}); err != nil || c["w"] != (schema.Collation{Name: bytewise, Bytewise: true}) {
			t.Errorf("collations of t_bytes: %+v, %v; want w in %s, bytewise", c, err, bytewise)
		}
		if c, err := schema.Collations(ctx, db, d, []string{"t_char"}); err != nil || c["w"] != (schema.Collation{Name: bytewise, Bytewise: true, Trims: true}) {
			t.Errorf("collations of t_char: %+v, %v; want w in %s, bytewise, trimmed", c, err, bytewise)
		}
		refused := func(tg schema.Target, tb plans.Table, want ...string) {
			t.Helper()
			err := tg.KeyCollations(ctx, db, tb, text)
			if !errors.Is(err, plans.ErrInvalid) {
				t.Errorf("%s from %s: %v, want ErrInvalid", tb.Target, tb.Name, err)
				return
			}
			for _, w := range append(want, "target table "+tb.Target, "key column w", d.BytewiseColumn([]string{tb.Target}, dialect.Column{Name: "w"})[:20]) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s from %s: %v\ndoes not say %q", tb.Target, tb.Name, err, w)
				}
			}
		}
		cross := schema.Target{SQL: d, Source: other, FenceColumn: "_fence"}
		table := func(src, dst string) plans.Table { return plans.Table{Name: src, Target: dst, Key: []string{"w"}} }
		refused(cross, table("words", "t_ci"), ci, "the source ("+string(other)+")")
		refused(cross, table("words", "t_padbin"))
		refused(cross, table("words", "t_char"), "drops trailing spaces")
		uuid := []dialect.Column{{Name: "w", Type: "uuid", Base: "uuid"}}
		if err := cross.KeyCollations(ctx, db, table("words", "t_char"), uuid); err != nil {
			t.Errorf("t_char from a uuid key, which has no trailing spaces: %v", err)
		}
		for _, tb := range []string{"t_bytes", "t_int", "t_missing"} {
			if err := cross.KeyCollations(ctx, db, table("words", tb), text); err != nil {
				t.Errorf("%s: %v", tb, err)
			}
		}

		// One engine: a source key column of the same collation passes.
		same := schema.Target{SQL: d, Source: d.Engine(), FenceColumn: "_fence", SourceDB: db, SourceSQL: d}
		if err := same.KeyCollations(ctx, db, table("s_ci", "t_ci"), text); err != nil {
			t.Errorf("t_ci from s_ci: %v", err)
		}
		refused(same, table("s_bin", "t_ci"), "the source's key column has collation")
		refused(same, table("s_ci", "t_char"))
		refused(schema.Target{SQL: d, Source: d.Engine(), FenceColumn: "_fence"}, table("s_ci", "t_ci")) // the source unread

		// Setup's Prepare refuses it too, and passes it once the remedy
		// named has run.
		src := []dialect.Column{{Name: "w", Type: "text", Base: "text", NotNull: true}}
		if other == plans.MySQL {
			src[0].Type, src[0].Base = "varchar(10)", "varchar"
		}
		def := &dialect.TableDef{Engine: other, Name: []string{"words"}, Columns: []dialect.ColumnDef{{Column: src[0]}},
			PrimaryKey: &dialect.Index{Unique: true, Constraint: true, Parts: []dialect.IndexPart{{Column: "w"}}}}
		if _, err := cross.Prepare(ctx, db, table("words", "t_ci"), src, def); !errors.Is(err, plans.ErrInvalid) || !strings.Contains(err.Error(), ci) {
			t.Errorf("Prepare of t_ci: %v, want ErrInvalid naming %s", err, ci)
		}
		cols, err := schema.Columns(ctx, db, d, []string{"t_ci"})
		if err != nil {
			t.Fatal(err)
		}
		exec(t, db, d.BytewiseColumn([]string{"t_ci"}, cols[0]))
		if err := cross.KeyCollations(ctx, db, table("words", "t_ci"), text); err != nil {
			t.Errorf("t_ci after %s: %v", d.BytewiseColumn([]string{"t_ci"}, cols[0]), err)
		}

		// A table created for a source of the other engine, keyed by text.
		p, err := cross.Prepare(ctx, db, table("words", "t_created"), src, def)
		if err != nil || !p.Created {
			t.Fatalf("missing table: %+v, %v", p, err)
		}
		for _, q := range p.DDL {
			exec(t, db, q)
		}
		if err := cross.KeyCollations(ctx, db, table("words", "t_created"), text); err != nil {
			t.Errorf("a table migrate created: %v", err)
		}
		if _, err := cross.Prepare(ctx, db, table("words", "t_ci"), src, def); err != nil {
			t.Errorf("Prepare after the remedy: %v", err)
		}
	})
}

// A PostgreSQL table whose key comes from a sequence no column owns, and
// whose partition declares foreign keys of its own (issue 25, items 7 and
// 8), prepared for a target table in another schema: the sequence of the
// source table's schema goes to the target's (the default names it there),
// a partition's foreign key is re-pointed at the target of the table it
// references, or noted when the plan does not copy that table. Toward
// MySQL the key is AUTO_INCREMENT, reset after the load.
func TestTarget_PrepareUnownedSequenceAndPartitionKeys(t *testing.T) {
	each(t, func(t *testing.T, db *sql.DB, d dialect.Dialect) {
		if d.Engine() == plans.Postgres {
			exec(t, db, "CREATE SCHEMA shop")
		}
		src := []dialect.Column{{Name: "id", Type: "integer", Base: "integer", NotNull: true}, {Name: "at", Type: "date", Base: "date", NotNull: true},
			{Name: "item", Type: "integer", Base: "integer", NotNull: true}}
		id := dialect.ColumnDef{Column: src[0], Default: dialect.Default{Kind: dialect.DefaultExpr, Expr: "nextval('moves_id_seq'::regclass)"}, Sequence: []string{"public", "moves_id_seq"}}
		def := &dialect.TableDef{Engine: plans.Postgres, Name: []string{"public", "moves"},
			Columns:     []dialect.ColumnDef{id, {Column: src[1]}, {Column: src[2]}},
			PrimaryKey:  &dialect.Index{Name: "moves_pkey", Unique: true, Constraint: true, Parts: []dialect.IndexPart{{Column: "id"}, {Column: "at"}}},
			PartitionBy: "RANGE (at)",
			Partitions: []dialect.Partition{{Name: []string{"public", "moves_2024"}, Bound: "FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')",
				ForeignKeys: []dialect.ForeignKey{
					{Name: "moves_item_fk", Columns: []string{"item"}, RefTable: []string{"public", "items"}, RefColumns: []string{"id"}},
					{Name: "moves_lost_fk", Columns: []string{"item"}, RefTable: []string{"public", "lost"}, RefColumns: []string{"id"}},
				}}},
			Sequences: []dialect.Sequence{{Name: []string{"public", "moves_id_seq"}, Ref: "moves_id_seq", Type: "integer", Start: 1, Increment: 1, Min: 1, Max: 2147483647, Cache: 1}},
		}
		target := "shop.moves"
		if d.Engine() == plans.MySQL {
			target = "moves"
		}
		tb := plans.Table{Name: "public.moves", Target: target, Key: []string{"id", "at"}}
		items := []string{"shop", "items"}
		if d.Engine() == plans.MySQL {
			items = []string{"items"}
		}
		tg := schema.Target{SQL: d, Source: plans.Postgres, FenceColumn: "_fence", Targets: map[string][]string{"public.items": items}}
		p, err := tg.Prepare(t.Context(), db, tb, src, def)
		if err != nil {
			t.Fatal(err)
		}
		ddl, notes := strings.Join(p.DDL, ";\n"), strings.Join(p.Notes, "\n")
		if !strings.Contains(notes, "foreign key moves_lost_fk of partition moves_2024 references public.lost, which the plan does not copy") {
			t.Errorf("notes:\n%s", notes)
		}
		var steps []string
		for _, st := range p.Steps {
			steps = append(steps, st.SQL)
		}
		if d.Engine() == plans.Postgres {
			for _, w := range []string{`CREATE SEQUENCE IF NOT EXISTS "shop"."moves_id_seq" AS integer`, `DEFAULT nextval('"shop"."moves_id_seq"'::regclass)`} {
				if !strings.Contains(ddl, w) {
					t.Errorf("no %s in:\n%s", w, ddl)
				}
			}
			if want := `ALTER TABLE "shop"."moves_2024" ADD CONSTRAINT "moves_item_fk" FOREIGN KEY ("item") REFERENCES "shop"."items" ("id") ON DELETE NO ACTION ON UPDATE NO ACTION`; len(steps) != 1 || steps[0] != want {
				t.Errorf("steps %q, want %q", steps, want)
			}
			for _, q := range p.DDL {
				exec(t, db, q)
			}
		} else {
			if !strings.Contains(ddl, "`id` int NOT NULL AUTO_INCREMENT") || len(steps) != 0 || !strings.Contains(notes, "moves_item_fk (item) of partition moves_2024") {
				t.Errorf("ddl:\n%s\nsteps %q\nnotes:\n%s", ddl, steps, notes)
			}
		}
		if seq := d.SequenceSteps(p.Def); len(seq) != 1 || seq[0].Name != "id" {
			t.Errorf("the dry run's sequence steps %+v, want id's", seq)
		}
	})
}
