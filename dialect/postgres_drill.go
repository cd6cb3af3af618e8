package dialect

import (
	"strconv"
)

// DrillCount implements Dialect.
func (p Postgres) DrillCount(table, key []string, fence string, after bool, r Range) Query {
	var q Query
	ph := func(arg int) string { q.Args = append(q.Args, arg); return "$" + strconv.Itoa(len(q.Args)) }
	sel := "SELECT count(*), count(*) FILTER (WHERE " + p.Quote(fence) + " < " + ph(len(key)+2) + ") FROM " + p.Quote(table...)
	q.SQL = sel + drillWhere(p, key, after, r, ph)
	return q
}

// DrillForget implements Dialect.
func (p Postgres) DrillForget() []string {
	return []string{
		"DELETE FROM " + p.Quote(CheckpointTable) + " WHERE plan = $1",
		"DELETE FROM " + p.Quote(FenceTable) + " WHERE plan = $1",
		"DELETE FROM " + p.Quote(PostLoadTable) + " WHERE plan = $1",
		"DELETE FROM " + p.Quote(TakeoverTable) + " WHERE plan = $1",
		"DELETE FROM " + p.Quote(ProgressTable) + " WHERE plan = $1",
		"DELETE FROM " + p.Quote(StreamTable) + " WHERE plan = $1",
		"DELETE FROM " + p.Quote(StreamTableTable) + " WHERE plan = $1",
		"DELETE FROM " + p.Quote(OutboxTable) + " WHERE plan = $1",
		"DELETE FROM " + p.Quote(DeliveryTable) + " WHERE plan = $1",
		"DELETE FROM " + p.Quote(SinkTable) + " WHERE plan = $1",
	}
}

// DrillInsert implements Dialect.
func (p Postgres) DrillInsert(table, cols []string) string {
	return drillInsert(p, table, cols, func(i int) string { return "$" + strconv.Itoa(i) })
}

// DrillUpdate implements Dialect.
func (p Postgres) DrillUpdate(table, cols, key []string) string {
	return drillUpdate(p, table, cols, key, func(i int) string { return "$" + strconv.Itoa(i) })
}
