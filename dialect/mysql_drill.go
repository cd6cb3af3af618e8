package dialect

// DrillCount implements Dialect.
func (m MySQL) DrillCount(table, key []string, fence string, after bool, r Range) Query {
	var q Query
	ph := func(arg int) string { q.Args = append(q.Args, arg); return "?" }
	sel := "SELECT COUNT(*), COALESCE(SUM(" + m.Quote(fence) + " < " + ph(len(key)+2) + "), 0) FROM " + m.Quote(table...)
	q.SQL = sel + drillWhere(m, key, after, r, ph)
	return q
}

// DrillForget implements Dialect.
func (m MySQL) DrillForget() []string {
	return []string{
		"DELETE FROM " + m.Quote(CheckpointTable) + " WHERE plan = ?",
		"DELETE FROM " + m.Quote(FenceTable) + " WHERE plan = ?",
		"DELETE FROM " + m.Quote(PostLoadTable) + " WHERE plan = ?",
		"DELETE FROM " + m.Quote(TakeoverTable) + " WHERE plan = ?",
		"DELETE FROM " + m.Quote(ProgressTable) + " WHERE plan = ?",
		"DELETE FROM " + m.Quote(StreamTable) + " WHERE plan = ?",
		"DELETE FROM " + m.Quote(StreamTableTable) + " WHERE plan = ?",
		"DELETE FROM " + m.Quote(OutboxTable) + " WHERE plan = ?",
		"DELETE FROM " + m.Quote(DeliveryTable) + " WHERE plan = ?",
		"DELETE FROM " + m.Quote(SinkTable) + " WHERE plan = ?",
	}
}

// DrillInsert implements Dialect.
func (m MySQL) DrillInsert(table, cols []string) string {
	return drillInsert(m, table, cols, func(int) string { return "?" })
}

// DrillUpdate implements Dialect.
func (m MySQL) DrillUpdate(table, cols, key []string) string {
	return drillUpdate(m, table, cols, key, func(int) string { return "?" })
}
