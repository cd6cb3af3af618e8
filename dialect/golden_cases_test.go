package dialect

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/plans"
)

// goldenCase calls one method of a dialect and renders what it returns.
type goldenCase struct {
	method string // the Dialect (or BulkInserter) method called
	name   string // the case, "" for a method's only one
	run    func(d Dialect, f fixture) string
}

// fixture is what the cases take from an engine: a DSN, and a table's
// columns in the engine's own types.
type fixture struct {
	dsn  string
	cols []Column
}

// Identifiers: mixed case, schema-qualified, quote characters of both
// engines inside.
var (
	gTable    = []string{"Orders"}
	gQual     = []string{"Sales", "Or\"der`s"}
	gCols     = []string{"id", "Region", "amount"}
	gKey      = []string{"id"}
	gKey2     = []string{"Region", "id"}
	gFence    = "_fence"
	gOwnFence = "Writer Token" // a fence column named in the plan
	gBounds   = Range{Lo: 100, Hi: 200}
)

var pgFixture = fixture{
	dsn: "postgres://migrate@db.example.com:5433/shop?sslmode=disable",
	cols: []Column{
		{Name: "id", Type: "bigint", Base: "bigint", NotNull: true},
		{Name: "Region", Type: "text", Base: "text", NotNull: true},
		{Name: "amount", Type: "numeric(12,2)", Base: "numeric"},
		{Name: "at", Type: "timestamp(3) with time zone", Base: "timestamp with time zone"},
		{Name: "ratio", Type: "double precision", Base: "double precision"},
		{Name: "score", Type: "real", Base: "real"},
		{Name: "tags", Type: "jsonb", Base: "jsonb"},
		{Name: "Body Text", Type: "text", Base: "text"},
		{Name: "raw", Type: "bytea", Base: "bytea", NotNull: true},
	},
}

var myFixture = fixture{
	dsn: "mysql://migrate@db.example.com:3307/shop",
	cols: []Column{
		{Name: "id", Type: "bigint", Base: "bigint", NotNull: true},
		{Name: "Region", Type: "varchar(32)", Base: "varchar", NotNull: true},
		{Name: "amount", Type: "decimal(12,2)", Base: "decimal"},
		{Name: "at", Type: "timestamp(3)", Base: "timestamp"},
		{Name: "ratio", Type: "double", Base: "double"},
		{Name: "score", Type: "float", Base: "float"},
		{Name: "tags", Type: "json", Base: "json"},
		{Name: "Body Text", Type: "longtext", Base: "longtext"},
		{Name: "raw", Type: "varbinary(16)", Base: "varbinary", NotNull: true},
	},
}

func (f fixture) names() []string {
	n := make([]string, len(f.cols))
	for i, c := range f.cols {
		n[i] = c.Name
	}
	return n
}

// withFloats is d told the fixture's column types for gQual, as the copy
// of a table tells it (WithColumns: MySQL reads FLOAT as a double).
func withFloats(d Dialect, f fixture) Dialect { return WithColumns(d, gQual, f.cols) }

var goldenCases = slices.Concat(connCases, catalogCases, schemaCases, copyCases, verifyCases, fenceCases, checkpointCases, drillCases, bulkCases)

var connCases = []goldenCase{
	{"Engine", "", func(d Dialect, _ fixture) string { return string(d.Engine()) }},
	{"Open", "no session", func(d Dialect, f fixture) string { return openConfig(d, f, Session{}) }},
	{"Open", "lease TTL 30s", func(d Dialect, f fixture) string { return openConfig(d, f, SessionFor(30*time.Second)) }},
	{"Open", "source, raw times", func(d Dialect, f fixture) string { return openConfig(d, f, Session{RawTimes: true}) }},
	{"Open", "under a second", func(d Dialect, f fixture) string {
		return openConfig(d, f, Session{IdleInTransaction: 300 * time.Millisecond, Statement: 400 * time.Millisecond, Lock: 500 * time.Microsecond})
	}},
	{"Quote", "one part", func(d Dialect, _ fixture) string { return d.Quote("id") }},
	{"Quote", "schema-qualified, mixed case, quotes inside", func(d Dialect, _ fixture) string { return d.Quote(gQual...) }},
	{"BoundTx", "2.5s", func(d Dialect, _ fixture) string { return withArgs(d.BoundTx(2500 * time.Millisecond)) }},
	{"BoundTx", "under a second", func(d Dialect, _ fixture) string { return withArgs(d.BoundTx(300 * time.Microsecond)) }},
	{"UnboundTx", "", func(d Dialect, _ fixture) string { return stmt(d.UnboundTx()) }},
	{"ReadCommitted", "", func(d Dialect, _ fixture) string { return d.ReadCommitted() }},
	{"BoundSession", "", func(d Dialect, _ fixture) string { return withArgs(d.BoundSession(90 * time.Second)) }},
}

var catalogCases = []goldenCase{
	{"Columns", "unqualified", func(d Dialect, _ fixture) string { return withArgs(d.Columns(gTable)) }},
	{"Columns", "schema-qualified", func(d Dialect, _ fixture) string { return withArgs(d.Columns(gQual)) }},
	{"TableExists", "unqualified", func(d Dialect, _ fixture) string { return withArgs(d.TableExists(gTable)) }},
	{"TableExists", "schema-qualified", func(d Dialect, _ fixture) string { return withArgs(d.TableExists(gQual)) }},
	{"UniqueKeys", "unqualified", func(d Dialect, _ fixture) string { return withArgs(d.UniqueKeys(gTable)) }},
	{"UniqueKeys", "schema-qualified", func(d Dialect, _ fixture) string { return withArgs(d.UniqueKeys(gQual)) }},
	{"Connections", "", func(d Dialect, _ fixture) string { return d.Connections() }},
	{"EstimateRows", "unqualified", func(d Dialect, _ fixture) string { return withArgs(d.EstimateRows(gTable)) }},
	{"EstimateRows", "schema-qualified", func(d Dialect, _ fixture) string { return withArgs(d.EstimateRows(gQual)) }},
	{"CountRows", "", func(d Dialect, _ fixture) string { return d.CountRows(gQual) }},
	{"KeyBounds", "", func(d Dialect, _ fixture) string { return d.KeyBounds(gQual, "Region") }},
	{"KeyAt", "", func(d Dialect, _ fixture) string { return d.KeyAt(gQual, "Region") }},
	{"Collations", "unqualified", func(d Dialect, _ fixture) string { return withArgs(d.Collations(gTable)) }},
	{"Collations", "schema-qualified", func(d Dialect, _ fixture) string { return withArgs(d.Collations(gQual)) }},
}

var schemaCases = []goldenCase{
	{"CreateTable", "composite key", func(d Dialect, f fixture) string { return d.CreateTable(gQual, f.cols, gKey2, gFence) }},
	{"CreateTable", "fence named in the plan", func(d Dialect, f fixture) string {
		return d.CreateTable(gTable, f.cols[:2], gKey, gOwnFence)
	}},
	{"MaxToken", "", func(d Dialect, _ fixture) string { return d.MaxToken(gQual, gOwnFence) }},
	{"AddFenceColumn", "", func(d Dialect, _ fixture) string { return d.AddFenceColumn(gQual, gOwnFence) }},
	{"Helpers", "", func(d Dialect, _ fixture) string { return stmts(d.Helpers()) }},
	{"SetupLock", "", func(d Dialect, _ fixture) string { return withArgs(d.SetupLock("migrate-setup:orders-move")) }},
	{"SetupLock", "name over 64 characters", func(d Dialect, _ fixture) string {
		return withArgs(d.SetupLock("migrate-setup:" + strings.Repeat("0123456789", 6)))
	}},
	{"SetupUnlock", "", func(d Dialect, _ fixture) string { return withArgs(d.SetupUnlock("migrate-setup:orders-move")) }},
	{"SetupUnlock", "name over 64 characters", func(d Dialect, _ fixture) string {
		return withArgs(d.SetupUnlock("migrate-setup:" + strings.Repeat("0123456789", 6)))
	}},
}

var copyCases = []goldenCase{
	{"SelectPage", "first page, whole table", func(d Dialect, _ fixture) string {
		return query(d.SelectPage(gTable, gCols, gKey, false, Range{}, 1000))
	}},
	{"SelectPage", "after, whole table", func(d Dialect, _ fixture) string {
		return query(d.SelectPage(gQual, gCols, gKey, true, Range{}, 1000))
	}},
	{"SelectPage", "after, closed range", func(d Dialect, _ fixture) string {
		return query(d.SelectPage(gQual, gCols, gKey, true, gBounds, 1000))
	}},
	{"SelectPage", "first page, upper bound only", func(d Dialect, _ fixture) string {
		return query(d.SelectPage(gQual, gCols, gKey, false, Range{Hi: 200}, 500))
	}},
	{"SelectPage", "composite key after, lower bound only", func(d Dialect, _ fixture) string {
		return query(d.SelectPage(gQual, gCols, gKey2, true, Range{Lo: "EU"}, 1000))
	}},
	{"SelectPage", "composite key, first page, closed range", func(d Dialect, _ fixture) string {
		return query(d.SelectPage(gQual, gCols, gKey2, false, gBounds, 1000))
	}},
	{"SelectPage", "told the column types", func(d Dialect, f fixture) string {
		return query(withFloats(d, f).SelectPage(gQual, f.names(), gKey, true, Range{}, 1000))
	}},
	{"SelectLast", "whole table", func(d Dialect, _ fixture) string {
		return query(d.SelectLast(gQual, gCols, gKey, Range{}, 1000))
	}},
	{"SelectLast", "composite key, closed range", func(d Dialect, _ fixture) string {
		return query(d.SelectLast(gQual, gCols, gKey2, gBounds, 1000))
	}},
	{"SelectLast", "told the column types", func(d Dialect, f fixture) string {
		return query(withFloats(d, f).SelectLast(gQual, f.names(), gKey, Range{Lo: 100}, 10))
	}},
	{"Upsert", "one row", func(d Dialect, _ fixture) string { return upsert(d.Upsert(gTable, gCols, gKey, gFence, 1)) }},
	{"Upsert", "composite key, 3 rows", func(d Dialect, _ fixture) string {
		return upsert(d.Upsert(gQual, gCols, gKey2, gFence, 3))
	}},
	{"Upsert", "every column in the key, fence named in the plan", func(d Dialect, _ fixture) string {
		return upsert(d.Upsert(gQual, gKey2, gKey2, gOwnFence, 2))
	}},
	{"SelectByKeys", "3 keys", func(d Dialect, _ fixture) string { return d.SelectByKeys(gQual, gCols, gKey, 3) }},
	{"SelectByKeys", "composite key, 2 keys", func(d Dialect, _ fixture) string { return d.SelectByKeys(gQual, gCols, gKey2, 2) }},
	{"SelectByKeys", "told the column types", func(d Dialect, f fixture) string {
		return withFloats(d, f).SelectByKeys(gQual, f.names(), gKey, 2)
	}},
	{"DeleteByKeys", "3 keys", func(d Dialect, _ fixture) string { return d.DeleteByKeys(gQual, gKey, 3) }},
	{"DeleteByKeys", "composite key, 2 keys", func(d Dialect, _ fixture) string { return d.DeleteByKeys(gQual, gKey2, 2) }},
	{"DeleteByKeys", "composite key, 1 key", func(d Dialect, _ fixture) string { return d.DeleteByKeys(gQual, gKey2, 1) }},
	{"MaxParams", "", func(d Dialect, _ fixture) string { return fmt.Sprint(d.MaxParams()) }},
}

var verifyCases = []goldenCase{
	{"ScanOrdered", "whole table", func(d Dialect, f fixture) string {
		return query(d.ScanOrdered(gQual, f.cols, gKey, []bool{false}, false, false))
	}},
	{"ScanOrdered", "composite text key, lo and hi", func(d Dialect, f fixture) string {
		return query(d.ScanOrdered(gQual, f.cols, gKey2, []bool{true, false}, true, true))
	}},
	{"ScanOrdered", "binary key, lo only", func(d Dialect, f fixture) string {
		return query(d.ScanOrdered(gQual, f.cols, []string{"raw"}, []bool{true}, true, false))
	}},
	{"ScanOrdered", "hi only", func(d Dialect, f fixture) string {
		return query(d.ScanOrdered(gQual, f.cols, gKey, []bool{false}, false, true))
	}},
	{"ChunkEnd", "first chunk", func(d Dialect, _ fixture) string { return query(d.ChunkEnd(gQual, gKey, false, 1000)) }},
	{"ChunkEnd", "composite key, after lo", func(d Dialect, _ fixture) string {
		return query(d.ChunkEnd(gQual, gKey2, true, 1000))
	}},
	{"Checksum", "whole table", func(d Dialect, f fixture) string {
		return query(d.Checksum(gQual, f.cols, gKey, false, false))
	}},
	{"Checksum", "composite key, lo and hi", func(d Dialect, f fixture) string {
		return query(d.Checksum(gQual, f.cols, gKey2, true, true))
	}},
	{"Checksum", "hi only", func(d Dialect, f fixture) string { return query(d.Checksum(gTable, f.cols[:2], gKey, false, true)) }},
	{"OrderedByValue", "", func(d Dialect, _ fixture) string {
		var b strings.Builder
		for _, base := range []string{"smallint", "integer", "int", "bigint", "numeric", "decimal", "real", "float", "double",
			"double precision", "date", "datetime", "timestamp", "timestamp without time zone", "timestamp with time zone",
			"time", "time without time zone", "year", "uuid", "bytea", "binary", "varbinary", "blob", "char", "varchar",
			"text", "enum", "set", "json", "jsonb", "boolean"} {
			fmt.Fprintf(&b, "%s: %v\n", base, d.OrderedByValue(Column{Name: "k", Base: base}))
		}
		return strings.TrimSuffix(b.String(), "\n")
	}},
}

var fenceCases = []goldenCase{
	{"FenceClaim", "", func(d Dialect, _ fixture) string { return d.FenceClaim() }},
	{"FenceCheck", "", func(d Dialect, _ fixture) string { return d.FenceCheck() }},
	{"FenceRead", "", func(d Dialect, _ fixture) string { return d.FenceRead() }},
	{"FenceFloor", "", func(d Dialect, _ fixture) string { return d.FenceFloor() }},
	{"FenceBreak", "", func(d Dialect, _ fixture) string { return d.FenceBreak() }},
	{"FenceEnd", "", func(d Dialect, _ fixture) string { return d.FenceEnd() }},
}

var checkpointCases = []goldenCase{
	{"CheckpointInit", "", func(d Dialect, _ fixture) string { return d.CheckpointInit() }},
	{"CheckpointRead", "snapshot", func(d Dialect, _ fixture) string { return d.CheckpointRead(false) }},
	{"CheckpointRead", "locking, for the takeover", func(d Dialect, _ fixture) string { return d.CheckpointRead(true) }},
	{"CheckpointAdvance", "", func(d Dialect, _ fixture) string { return d.CheckpointAdvance() }},
	{"StreamSchema", "", func(d Dialect, _ fixture) string { return d.StreamSchema() }},
	{"StreamInit", "", func(d Dialect, _ fixture) string { return d.StreamInit() }},
	{"StreamTableInit", "", func(d Dialect, _ fixture) string { return d.StreamTableInit() }},
	{"StreamRead", "snapshot", func(d Dialect, _ fixture) string { return d.StreamRead(false) }},
	{"StreamRead", "locking, in the applier's transaction", func(d Dialect, _ fixture) string { return d.StreamRead(true) }},
	{"StreamAdvance", "", func(d Dialect, _ fixture) string { return d.StreamAdvance() }},
	{"StreamState", "", func(d Dialect, _ fixture) string { return d.StreamState() }},
	{"StreamApplied", "before a copy reads a page", func(d Dialect, _ fixture) string { return d.StreamApplied(false) }},
	{"StreamApplied", "shared, in a copy batch", func(d Dialect, _ fixture) string { return d.StreamApplied(true) }},
	{"StreamBump", "", func(d Dialect, _ fixture) string { return d.StreamBump() }},
	{"StreamAsyncCommit", "", func(d Dialect, _ fixture) string { return d.StreamAsyncCommit() }},
	{"StreamUpsert", "two rows, composite key", func(d Dialect, _ fixture) string { return d.StreamUpsert(gQual, gCols, gKey2, gOwnFence, 2) }},
	{"StreamUpdate", "unchanged values kept", func(d Dialect, _ fixture) string { return d.StreamUpdate(gTable, []string{"amount"}, gKey2, gFence) }},
	{"CheckpointState", "", func(d Dialect, _ fixture) string { return d.CheckpointState() }},
	{"CheckpointResume", "plan", func(d Dialect, _ fixture) string { return d.CheckpointResume(false, false) }},
	{"CheckpointResume", "table", func(d Dialect, _ fixture) string { return d.CheckpointResume(true, false) }},
	{"CheckpointResume", "shard", func(d Dialect, _ fixture) string { return d.CheckpointResume(false, true) }},
	{"CheckpointResume", "table and shard", func(d Dialect, _ fixture) string { return d.CheckpointResume(true, true) }},
	{"CheckpointList", "", func(d Dialect, _ fixture) string { return d.CheckpointList() }},
}

var drillCases = []goldenCase{
	{"DrillCount", "whole table", func(d Dialect, _ fixture) string {
		return query(d.DrillCount(gTable, gKey, gFence, false, Range{}))
	}},
	{"DrillCount", "after, closed range", func(d Dialect, _ fixture) string {
		return query(d.DrillCount(gQual, gKey, gFence, true, gBounds))
	}},
	{"DrillCount", "composite key after, upper bound only, fence named in the plan", func(d Dialect, _ fixture) string {
		return query(d.DrillCount(gQual, gKey2, gOwnFence, true, Range{Hi: "US"}))
	}},
	{"DropTable", "", func(d Dialect, _ fixture) string { return d.DropTable(gQual) }},
	{"TransactionalDDL", "", func(d Dialect, _ fixture) string { return fmt.Sprint(d.TransactionalDDL()) }},
	{"UpsertMatchesAnyUnique", "", func(d Dialect, _ fixture) string { return fmt.Sprint(d.UpsertMatchesAnyUnique()) }},
	{"BytewiseColumn", "", func(d Dialect, f fixture) string {
		fixed := map[plans.Engine]Column{plans.Postgres: {Name: "Code", Type: "character(3)", Base: "character"}, plans.MySQL: {Name: "Code", Type: "char(3)", Base: "char"}}[d.Engine()]
		return stmts([]string{d.BytewiseColumn(gQual, f.cols[1]), d.BytewiseColumn(gTable, fixed)})
	}},
	{"KeysetKey", "", func(d Dialect, _ fixture) string {
		var b strings.Builder
		for _, base := range []string{"bigint", "varchar", "text", "enum", "set"} {
			fmt.Fprintf(&b, "%s: %q\n", base, d.KeysetKey(Column{Name: "k", Base: base}))
		}
		return b.String()
	}},
	{"DrillForget", "", func(d Dialect, _ fixture) string { return stmts(d.DrillForget()) }},
	{"DrillInsert", "", func(d Dialect, _ fixture) string { return d.DrillInsert(gQual, gCols) }},
	{"DrillUpdate", "composite key", func(d Dialect, _ fixture) string { return d.DrillUpdate(gQual, []string{"amount"}, gKey2) }},
	{"TakeoverAdd", "", func(d Dialect, _ fixture) string { return d.TakeoverAdd() }},
	{"TakeoverNote", "", func(d Dialect, _ fixture) string { return d.TakeoverNote() }},
	{"TakeoverPrune", "", func(d Dialect, _ fixture) string { return d.TakeoverPrune() }},
	{"TakeoverCount", "", func(d Dialect, _ fixture) string { return d.TakeoverCount() }},
	{"TakeoverLast", "", func(d Dialect, _ fixture) string { return d.TakeoverLast() }},
	{"ProgressPut", "", func(d Dialect, _ fixture) string { return d.ProgressPut() }},
	{"ProgressGet", "", func(d Dialect, _ fixture) string { return d.ProgressGet() }},
	{"OutboxAdd", "", func(d Dialect, _ fixture) string { return d.OutboxAdd() }},
	{"OutboxEvents", "", func(d Dialect, _ fixture) string { return d.OutboxEvents() }},
	{"OutboxPending", "", func(d Dialect, _ fixture) string { return d.OutboxPending() }},
	{"DeliveryPut", "", func(d Dialect, _ fixture) string { return d.DeliveryPut() }},
	{"Deliveries", "", func(d Dialect, _ fixture) string { return d.Deliveries() }},
	{"SinkPut", "", func(d Dialect, _ fixture) string { return d.SinkPut() }},
	{"Sinks", "", func(d Dialect, _ fixture) string { return d.Sinks() }},
	{"LeaseTable", "", func(d Dialect, _ fixture) string { return d.LeaseTable() }},
	{"LeaseInit", "", func(d Dialect, _ fixture) string { return d.LeaseInit() }},
	{"LeaseAcquire", "", func(d Dialect, _ fixture) string { return d.LeaseAcquire() }},
	{"LeaseRenew", "", func(d Dialect, _ fixture) string { return d.LeaseRenew() }},
	{"LeaseRelease", "", func(d Dialect, _ fixture) string { return d.LeaseRelease() }},
	{"LeaseRead", "", func(d Dialect, _ fixture) string { return d.LeaseRead(false) }},
	{"LeaseRead", "locking", func(d Dialect, _ fixture) string { return d.LeaseRead(true) }},
	{"LeaseRaise", "", func(d Dialect, _ fixture) string { return d.LeaseRaise() }},
	{"LeaseForget", "", func(d Dialect, _ fixture) string { return d.LeaseForget() }},
}

// bulkCases pin the statement of BulkInserter.Load (COPY, LOAD DATA).
var bulkCases = []goldenCase{
	{"Load", "", func(d Dialect, f fixture) string {
		switch d := d.(type) {
		case MySQL:
			return d.loadStatement("migrate-1", gQual, f.cols, gFence)
		case Postgres:
			return d.copyStatement(gQual, f.cols, gFence)
		}
		panic(fmt.Sprintf("no bulk statement for %T", d))
	}},
}

// openConfig is what d.Open sets on its connections to the fixture's DSN
// with the session s.
func openConfig(d Dialect, f fixture, s Session) string {
	dsn, err := plans.ParseDSN(f.dsn)
	if err != nil {
		panic(err)
	}
	db, err := d.Open(dsn, s) // connects to nothing yet
	if err != nil {
		panic(err)
	}
	_ = db.Close()
	switch d.(type) {
	case MySQL:
		cfg, err := mysqlOpenConfig(dsn, s)
		if err != nil {
			panic(err)
		}
		return cfg.FormatDSN()
	case Postgres:
		cfg, err := pgOpenConfig(dsn, s)
		if err != nil {
			panic(err)
		}
		lines := []string{fmt.Sprintf("host=%s port=%d database=%s user=%s", cfg.Host, cfg.Port, cfg.Database, cfg.User)}
		for _, k := range slices.Sorted(maps.Keys(cfg.RuntimeParams)) {
			lines = append(lines, k+"="+cfg.RuntimeParams[k])
		}
		return strings.Join(lines, "\n")
	}
	panic(fmt.Sprintf("no config for %T", d))
}

// stmt is a statement, "" shown as such.
func stmt(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// withArgs is a statement and the values of its parameters.
func withArgs(s string, args []any) string { return stmt(s) + "\nargs: " + values(args) }

func values(args []any) string {
	if len(args) == 0 {
		return "none"
	}
	v := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case nil:
			v[i] = "nil"
		case string:
			v[i] = fmt.Sprintf("%q", a)
		default:
			v[i] = fmt.Sprintf("%T(%v)", a, a)
		}
	}
	return strings.Join(v, ", ")
}

// query is a Query's statement and the logical value of each parameter.
func query(q Query) string {
	if len(q.Args) == 0 {
		return q.SQL + "\nargs: none"
	}
	v := make([]string, len(q.Args))
	for i, a := range q.Args {
		v[i] = fmt.Sprintf("#%d", a)
	}
	return q.SQL + "\nargs: " + strings.Join(v, ", ")
}

func upsert(u Upsert) string {
	s := fmt.Sprintf("%s\nreturns: %v, token per row: %v", u.SQL, u.Returns, u.TokenPerRow)
	if u.Probe != "" {
		s += "\nprobe: " + u.Probe
	}
	return s
}

// stmts are statements, each ended by a semicolon.
func stmts(ss []string) string {
	var b strings.Builder
	for i, s := range ss {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(s + ";")
	}
	return b.String()
}
