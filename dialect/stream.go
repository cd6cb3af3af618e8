package dialect

// The change stream's tables (stream/apply): the applier's committed
// position and counters per plan, and per copied table a count of the
// applier's transactions that wrote it, whose row orders the copy's
// batches with the applier's transactions (docs/streaming.md).
const (
	StreamTable      = "_migrate_stream"
	StreamTableTable = "_migrate_stream_table"
)

// Stream is the change stream's statements.
type Stream interface {
	// StreamSchema yields the schema (PostgreSQL) or database (MySQL) an
	// unqualified table name is in, as changes name it.
	StreamSchema() string
	// StreamInit records a plan's stream at the position capture started
	// from, unless it is recorded: args plan, position.
	StreamInit() string
	// StreamTableInit records a copied table's applied count, unless it
	// is recorded: args plan, table.
	StreamTableInit() string
	// StreamRead yields (pos, start_pos, state, txs, changes, source_commit,
	// applied_at, lag_ms, lag_bytes, started_at, now) of a plan's stream, the row locked when
	// lock: args plan.
	StreamRead(lock bool) string
	// StreamAdvance moves the position on, inside the applier's
	// transaction: args pos, transactions, changes, the last source
	// commit time (NULL: unchanged), the capture's lag in milliseconds and
	// bytes, plan.
	StreamAdvance() string
	// StreamState sets the stream's state ('following', 'stopping',
	// 'stopped'): args state, plan.
	StreamState() string
	// StreamApplied yields a table's applied count, the row locked shared
	// when lock (a copy batch holds it while it writes): args plan, table.
	StreamApplied(lock bool) string
	// StreamBump counts one applier transaction that writes a table, and
	// locks its row until the transaction ends: args plan, table.
	StreamBump() string
	// StreamUpsert writes rows rows of cols whatever their stored token,
	// the fence column set to 0: the stream's writes are ordered by the
	// source's commit order and the applier's fence, and a copy batch
	// that read the source after them may replace them.
	StreamUpsert(table []string, cols, key []string, fence string, rows int) string
	// StreamUpdate sets cols (no key column among them) and the fence
	// column to 0 in the row of one key: args cols' values then the key's.
	StreamUpdate(table []string, cols, key []string, fence string) string
	// StreamAsyncCommit is the statement that lets the applier's
	// transaction commit without waiting for its log to reach the disk
	// ("": the target cannot, for one transaction). A crash of the target
	// then loses a suffix of such commits, their position with them, and
	// the source, acknowledged only durable positions, sends them again.
	StreamAsyncCommit() string
}
