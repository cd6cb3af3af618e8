// Package dialect is the one place that holds the SQL of each database
// engine, by role (Conn, Catalog, Copy, Fence, Checkpoint, PostLoad,
// Records, Lease, Definitions…; one file per role per engine). Most roles
// return statement text that the packages which need them run (fence,
// cursor, batch, postload, records, lock/dblock), each through an interface
// of its own sized to the roles it calls; the roles whose work takes
// several engine-specific queries run them here: a table's whole
// definition and the DDL that re-creates it (Definitions), the bulk paths
// (COPY, LOAD DATA), the classification of errors. Identifiers are always
// quoted by the engine's own rules (pgx.Identifier.Sanitize for
// PostgreSQL); values are always bind parameters.
package dialect

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// Helper table names, created in the target database on first run.
const (
	FenceTable      = "_migrate_fence"
	CheckpointTable = "_migrate_checkpoint"
)

// Errors of BulkInserter.
var (
	// ErrConflict: a row of the batch exists in the target after all; the
	// batch must be written by the fenced upsert.
	ErrConflict = errors.New("a row of the batch already exists in the target")
	// ErrNotBulk: a value of the batch has no bulk form here; the batch
	// must be written by the fenced upsert.
	ErrNotBulk = errors.New("the batch cannot be written by bulk insert")
)

// BulkInserter is a dialect that writes rows the target does not hold yet
// by the engine's bulk protocol (COPY, LOAD DATA), several times faster
// than the upsert it may replace only where no row can exist yet. Encode
// appends rows, each with token for the fence column, in the protocol's
// text form to buf (cols are the target's columns, in the rows' order),
// or returns ErrNotBulk for a value it cannot write; it needs no
// connection, so a batch can be encoded while the previous one is
// written. Load sends n encoded rows into the transaction open on conn;
// it returns ErrConflict when a row exists after all (ErrNotBulk when the
// server refuses the protocol), and the transaction is then to be rolled
// back.
type BulkInserter interface {
	Encode(buf *bytes.Buffer, cols []Column, token int64, rows [][]any) error
	Load(ctx context.Context, conn *sql.Conn, table []string, cols []Column, fence string, data []byte, n int) error
}

// InsertNew encodes rows and loads them in one go.
func InsertNew(ctx context.Context, d BulkInserter, conn *sql.Conn, table []string, cols []Column, fence string, token int64, rows [][]any) error {
	var buf bytes.Buffer
	if err := d.Encode(&buf, cols, token, rows); err != nil {
		return err
	}
	return d.Load(ctx, conn, table, cols, fence, buf.Bytes(), len(rows))
}

// Column describes one column of a table as its engine reports it. It is
// package typemap's, which knows the engines' types and needs nothing of
// the SQL built here.
type Column = typemap.Column

// Session holds the server-side timeouts of F3: a frozen holder's open
// transaction must be aborted by the server before its lease could expire.
type Session struct {
	IdleInTransaction time.Duration
	Statement         time.Duration
	Lock              time.Duration
	// RawTimes reads MySQL DATE, DATETIME and TIMESTAMP values as text, for
	// a source: the driver's time.Time would shift dates with a zero month
	// or day into real dates.
	RawTimes bool
	// Lease is a session of lock/dblock's leases, whatever the server's
	// defaults: every commit durable before it is acknowledged
	// (PostgreSQL's synchronous_commit on; MySQL's
	// innodb_flush_log_at_trx_commit is the server's alone), and every
	// statement at READ COMMITTED (PostgreSQL's default_transaction_
	// isolation: at SERIALIZABLE, two standbys racing for a freed lease,
	// or a renewal beside a grant, would fail with a serialization error
	// instead of being told "held"; InnoDB's locking updates read the
	// latest row whatever the level).
	Lease bool
}

// SessionFor derives session-wide F3 timeouts from a lease TTL, a backstop
// for every statement: an idle transaction is aborted after TTL/3, a
// statement or lock wait after TTL/2. Transactions written under a lease are
// bounded tighter, to the lease's local deadline, by BoundTx.
func SessionFor(ttl time.Duration) Session {
	return Session{IdleInTransaction: ttl / 3, Statement: ttl / 2, Lock: ttl / 2}
}

// Range bounds a shard on the first key column: rows with Lo < k1 <= Hi.
// A nil bound is open.
type Range struct {
	Lo, Hi any
}

// Query is a statement whose bind parameters are picked from a list of
// logical values: Args[i] is the index of the i-th parameter's value.
type Query struct {
	SQL  string
	Args []int
}

// Bind picks the statement's parameters from the logical values.
func (q Query) Bind(values []any) []any {
	args := make([]any, len(q.Args))
	for i, a := range q.Args {
		args[i] = values[a]
	}
	return args
}

// Upsert is a batch write statement. Its parameters are each row's values
// followed by the token once, or (TokenPerRow) each row's values and the
// token. When Returns is true the statement is a query yielding one row
// (inserted, updated). Otherwise it is executed, and Probe, run first in the
// same transaction with the token then every row's key values as
// parameters, yields (rows that exist, rows with a newer token).
type Upsert struct {
	SQL         string
	Returns     bool
	TokenPerRow bool
	Probe       string
}

// Dialect produces the SQL of one engine: every role below. Callers that
// need one role take only that one.
type Dialect interface {
	Conn
	Catalog
	Schema
	Copy
	Verify
	Fence
	Checkpoint
	Drill
	Definitions
	Objects
	PostLoad
	Records
	Lease
	Stream
	Outbox
}

// Conn is how an engine is connected to, how its identifiers are quoted,
// and how a transaction is bounded on its server (F3).
type Conn interface {
	// Engine names the engine.
	Engine() plans.Engine
	// Open connects to dsn; with a non-zero Session, every connection
	// carries its timeouts.
	Open(dsn plans.DSN, s Session) (*sql.DB, error)
	// Quote quotes a possibly schema-qualified identifier.
	Quote(ident ...string) string
	// BoundTx bounds the current transaction on the server: no statement,
	// lock wait or idle pause may outlast remaining (F3).
	BoundTx(remaining time.Duration) (string, []any)
	// UnboundTx restores, on the same connection once the transaction has
	// ended, what BoundTx changed beyond it; "" when nothing outlives the
	// transaction.
	UnboundTx() string
	// ReadCommitted makes READ COMMITTED the isolation level of the
	// session's transactions from here on.
	ReadCommitted() string
	// BoundSession is BoundTx for every transaction of the session from
	// here on (a connection that is closed after them, fence.Session).
	BoundSession(remaining time.Duration) (string, []any)
}

// Catalog reads what the server knows of a table (its columns, unique
// keys, size and key bounds) and of itself (its connections).
type Catalog interface {
	// Columns lists a table's columns in ordinal order; args: the table.
	Columns(table []string) (string, []any)
	// TableExists yields one boolean row.
	TableExists(table []string) (string, []any)
	// UniqueKeys yields (index name, column name) rows for every unique
	// index or constraint of the table, columns in index order.
	UniqueKeys(table []string) (string, []any)
	// Connections yields one row: the connections clients may open (the
	// server's limit less reserved ones) and those open now.
	Connections() string
	// EstimateRows yields one approximate row count, cheaply.
	EstimateRows(table []string) (string, []any)
	// CountRows yields the exact row count.
	CountRows(table []string) string
	// KeyBounds yields (min, max) of one column.
	KeyBounds(table []string, col string) string
	// KeyAt yields the value of one column in the row at a position (its
	// one arg, from 0) in the column's order: a quantile, for shard bounds.
	KeyAt(table []string, col string) string
	// Collations yields (column, collation, bytewise, trims) for every
	// column of a table that compares by a collation, in ordinal order.
	// bytewise: the collation finds two values equal only when their
	// bytes are (no case, accent or trailing space ignored); trims: the
	// column's type drops or ignores trailing spaces (fixed-length
	// character types), whatever its collation.
	Collations(table []string) (string, []any)
}

// Schema prepares a target at setup (C4): its tables, the fence column,
// the helper tables, under a session lock.
type Schema interface {
	// CreateTable creates a table with the given columns and primary key,
	// plus the fence column.
	CreateTable(table []string, cols []Column, key []string, fence string) string
	// MaxToken reads the highest token in a table's fence column (0 when
	// it has no rows).
	MaxToken(table []string, fence string) string
	// AddFenceColumn adds the fence column to an existing table.
	AddFenceColumn(table []string, fence string) string
	// Helpers creates the watermark, checkpoint and post-load steps'
	// tables if missing.
	Helpers() []string
	// SetupLock and SetupUnlock take and give back a session lock that
	// serialises setup across instances; args: a lock name. They run on
	// one connection. SetupLock tries, waiting a second at most (well
	// under the session's statement timeout), and yields 1 when the lock
	// is held, 0 when it is not yet.
	SetupLock(name string) (string, []any)
	SetupUnlock(name string) (string, []any)
	// DropTable drops a table if it exists (a failed MySQL setup's own new
	// tables; a drill's --reset).
	DropTable(table []string) string
	// TransactionalDDL reports whether DDL can run inside a transaction
	// that a failure rolls back (PostgreSQL), rather than committing
	// itself (MySQL).
	TransactionalDDL() bool
	// UpsertMatchesAnyUnique reports whether the upsert's conflict
	// matches any unique index rather than the key's alone (MySQL's ON
	// DUPLICATE KEY UPDATE): then a target table may have no other.
	UpsertMatchesAnyUnique() bool
	// BytewiseColumn changes a column of type c (Columns' type) to
	// compare bytes (Catalog.Collations): the remedy named when a target's
	// key column does not. It keeps the column's type, but a fixed-length
	// character type that drops trailing spaces, and NOT NULL; the rest of
	// the column's definition is the operator's to restate.
	BytewiseColumn(table []string, c Column) string
	// KeysetKey says why a column of type c cannot be a keyset key (its
	// sort order differs from its comparison, so a keyset over it skips
	// rows), or "" when it can.
	KeysetKey(c Column) string
}

// Copy reads a shard's rows by keyset (C3) and writes them by the fenced
// upsert (F2), and reads and deletes rows by key for repair.
type Copy interface {
	// SelectPage reads up to limit rows of cols ordered by key, after the
	// key values given (when after is true) and within the shard range. The
	// logical values are the after key's parts, then lo, then hi.
	SelectPage(table []string, cols, key []string, after bool, r Range, limit int) Query
	// SelectLast reads up to limit rows of cols with keys up to and
	// including the key given, in descending key order, within the shard
	// range: the last committed batch before a resume point. The logical
	// values are the key's parts, then lo, then hi.
	SelectLast(table []string, cols, key []string, r Range, limit int) Query
	// Upsert writes rows rows of cols plus the fence column: an existing
	// row is overwritten only when its stored token is <= the incoming one.
	Upsert(table []string, cols, key []string, fence string, rows int) Upsert
	// SelectByKeys reads cols of the rows whose key is one of n keys given
	// as parameters (each key's parts in order), for repair.
	SelectByKeys(table []string, cols, key []string, n int) string
	// DeleteByKeys deletes the rows whose key is one of n keys given as
	// parameters, for repair.
	DeleteByKeys(table []string, key []string, n int) string
	// MaxParams is the most bind parameters one statement may carry.
	MaxParams() int
}

// Verify reads both sides for verification: rows in key order, chunk
// ends, chunk checksums.
type Verify interface {
	// ScanOrdered reads cols of a table ordered by key, the key columns
	// marked textKey in byte order, every value exactly, for verification:
	// all rows, or with lo and/or hi those with lo < key <= hi, the key
	// compared by value. The logical values are lo's parts then hi's.
	ScanOrdered(table []string, cols []Column, key []string, textKey []bool, lo, hi bool) Query
	// ChunkEnd yields the key of the n-th row after lo (all rows when lo is
	// false) in key order, or no row when fewer remain: the end of a
	// verification chunk. The logical values are lo's parts.
	ChunkEnd(table []string, key []string, lo bool, n int) Query
	// Checksum yields (rows, hash) of the rows with lo < key <= hi, bounds
	// as in ScanOrdered: their count, and a hash of a text form of their
	// cols that tells every value apart (MD5 in key order, or per-row hashes
	// aggregated; '' for no row, NULL when it could not be computed). Equal hashes need equal column types
	// on both sides, so it serves one engine only.
	Checksum(table []string, cols []Column, key []string, lo, hi bool) Query
	// OrderedByValue reports whether a key column of type c orders alike
	// in every database of the engine, whatever its collation, so that a
	// key range holds the same rows on both sides.
	OrderedByValue(c Column) bool
}

// Fence is the watermark's statements (F1).
type Fence interface {
	// FenceClaim raises the watermark strictly (F1): args plan, table,
	// shard, token, owner; any row affected means claimed.
	FenceClaim() string
	// FenceCheck locks the watermark row if it still holds exactly
	// (token, owner): args plan, table, shard, token, owner; any row
	// affected means still ours.
	FenceCheck() string
	// FenceRead yields (token, owner) of the watermark: args plan, table, shard.
	FenceRead() string
	// FenceFloor creates a watermark with no owner unless the shard has
	// one: args plan, table, shard, token.
	FenceFloor() string
	// FenceBreak lists the sessions of migrate that hold the watermark
	// row locked in an open transaction: rows of (pid, the transaction's
	// xid8 as text); args plan, table, shard. A successor ends them before
	// its claim (FenceEnd): a holder whose lease ended cannot commit
	// anything the successor needs, and one frozen while it sends rows
	// would otherwise hold the row for as long as it stays frozen
	// (PostgreSQL does not act on statement_timeout while it waits for
	// COPY data). "" where the server ends such a statement itself
	// (MySQL: net_read_timeout).
	FenceBreak() string
	// FenceEnd ends one session FenceBreak listed, only while it still
	// runs the transaction it was listed with, and yields whether it did:
	// args pid, xid8.
	FenceEnd() string
}

// Checkpoint is the cursor's statements (C1, C2).
type Checkpoint interface {
	// CheckpointInit inserts a pending checkpoint unless one exists: args
	// plan, table, shard, lo, hi.
	CheckpointInit() string
	// CheckpointRead yields (lo, hi, last_key, rows_done, token, state,
	// updated_at): args plan, table, shard. With lock it is a locking read,
	// for the takeover transaction: it must see the old holder's last
	// commit, and keep it.
	CheckpointRead(lock bool) string
	// CheckpointAdvance moves the cursor: args last_key, rows_done (the new
	// total, so a retried commit cannot count twice), token, plan, table,
	// shard, the rows_done the holder left there, and the new total again:
	// a row is updated only when rows_done is the first (or already the new
	// total, a retried commit whose reply was lost). None is when the target lost committed
	// batches (a crash of a non-durable server, a failover to a lagging
	// replica).
	CheckpointAdvance() string
	// CheckpointState sets the state: args state, token, plan, table, shard.
	CheckpointState() string
	// CheckpointResume sets halted checkpoints back to pending: args plan,
	// then the table when byTable, then the shard when byShard.
	CheckpointResume(byTable, byShard bool) string
	// CheckpointList yields (table, shard, state, rows_done, last_key,
	// token, updated_at) of a plan: args plan.
	CheckpointList() string
}

// Drill is the statements of `migrate drill` (package drill): counting what
// an old holder may have left behind in a shard, resetting a drill's
// target, and the writes of the stream drills' writer to the source.
type Drill interface {
	// DrillCount yields (rows, older) of a target table for `migrate
	// drill`: the rows within the shard range r — only those whose key is
	// after a given key when after — and how many of them hold a token
	// below a given one in the fence column. The logical values are the
	// key's parts, then lo, then hi, then the token.
	DrillCount(table, key []string, fence string, after bool, r Range) Query
	// DrillForget deletes a plan's checkpoint, watermark, post-load,
	// takeover, progress and change stream rows (a drill's --reset); each
	// statement takes the plan as its one arg.
	DrillForget() []string
	// DrillInsert inserts one row of cols into a source table: the stream
	// drills' writer. The values are cols' in order.
	DrillInsert(table, cols []string) string
	// DrillUpdate sets cols of the row with a key: the values are cols'
	// in order, then the key's parts.
	DrillUpdate(table, cols, key []string) string
}

// Detector is a dialect that refines itself once connected, from the
// server's version (MySQL vs MariaDB syntax; PostgreSQL's binary forms).
type Detector interface {
	Detect(ctx context.Context, db *sql.DB) (Dialect, error)
}

// columnAware is a dialect whose reads of a table's rows depend on its
// columns' types.
type columnAware interface {
	withColumns(table []string, cols []Column) Dialect
}

// WithColumns returns d told the types of cols of table, for the statements
// that read its rows for copying (SelectPage, SelectLast, SelectByKeys,
// which take column names only): MySQL reads a FLOAT column as a double
// there, which every protocol carries exactly. Columns it was not told of
// are read as they are; d itself is unchanged. Call it once per table, with
// its copied columns, before the reads begin.
func WithColumns(d Dialect, table []string, cols []Column) Dialect {
	if a, ok := d.(columnAware); ok {
		return a.withColumns(table, cols)
	}
	return d
}

// For returns the dialect of an engine.
func For(e plans.Engine) (Dialect, error) {
	switch e {
	case plans.Postgres:
		return Postgres{}, nil
	case plans.MySQL:
		return MySQL{}, nil
	default:
		return nil, fmt.Errorf("dialect: engine %q is not supported", e)
	}
}

// Open connects with d and, for a Detector, refines d from the server.
func Open(ctx context.Context, d Dialect, dsn plans.DSN, s Session) (*sql.DB, Dialect, error) {
	db, err := d.Open(dsn, s)
	if err != nil {
		return nil, nil, err
	}
	if det, ok := d.(Detector); ok {
		if d, err = det.Detect(ctx, db); err != nil {
			_ = db.Close()
			return nil, nil, err
		}
	}
	return db, d, nil
}

// quoteList quotes each column with d and joins them with commas.
func quoteList(d interface{ Quote(...string) string }, cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = d.Quote(c)
	}
	return strings.Join(q, ", ")
}
