package dialect

// The helper tables of what holders publish about their shards (package
// records) and of a lease kept in a database (lock/dblock).
const (
	TakeoverTable = "_migrate_takeover"
	ProgressTable = "_migrate_progress"
	LeaseTable    = "_migrate_lease"
)

// Records is the statements of what holders publish about their shards
// (package records): the takeovers, counted within a window by the
// database's clock, and each holder's pace, kept for a while.
type Records interface {
	// TakeoverAdd records a takeover at the database's time: args plan,
	// table, shard, token, record; one recorded already (its token) is
	// left as it is.
	TakeoverAdd() string
	// TakeoverNote replaces a takeover's record: args record, plan,
	// table, shard, token.
	TakeoverNote() string
	// TakeoverPrune deletes the takeovers older than a keep time: args
	// plan, table, shard, keep in milliseconds.
	TakeoverPrune() string
	// TakeoverCount yields the number of takeovers within a window: args
	// plan, table, shard, window in milliseconds.
	TakeoverCount() string
	// TakeoverLast yields the latest takeover's record: args plan, table,
	// shard.
	TakeoverLast() string
	// ProgressPut replaces a shard's progress, kept for a while: args
	// plan, table, shard, owner, rows_per_sec, eta_ms, table_rows, keep in
	// milliseconds.
	ProgressPut() string
	// ProgressGet yields (owner, rows_per_sec, eta_ms, table_rows) of a
	// progress still kept: args plan, table, shard.
	ProgressGet() string
}

// Lease is the statements of a lease kept in a database table
// (lock/dblock): one row per lease name, taken, renewed and freed by
// conditional updates whose every time is the database's clock, never the
// client's. Times come back as milliseconds since the Unix epoch.
type Lease interface {
	// LeaseTable creates the lease table unless it exists.
	LeaseTable() string
	// LeaseInit inserts a free lease row unless one exists: args name.
	LeaseInit() string
	// LeaseAcquire takes a free lease (its lease_until passed) for an
	// owner, with the next token, recording the holder before it: args
	// owner, ttl in milliseconds, name; one row affected means granted.
	LeaseAcquire() string
	// LeaseRenew extends an owner's unexpired lease: args ttl in
	// milliseconds, name, owner, token; one row affected means renewed.
	LeaseRenew() string
	// LeaseRelease frees an owner's unexpired lease, recorded as a clean
	// release: args name, owner, token; one row affected means released.
	LeaseRelease() string
	// LeaseRead yields (owner, token, remaining ms (negative when free),
	// renewed ms, acquired ms, released, prev_owner, prev_token,
	// prev_renewed ms, prev_released): args name. With lock it is a
	// locking read, inside the acquire's transaction.
	LeaseRead(lock bool) string
	// LeaseRaise makes the token at least a value: args value, name.
	LeaseRaise() string
	// LeaseForget deletes a free lease row: args name.
	LeaseForget() string
}
