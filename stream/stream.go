// Package stream is the contract between a source's change capture and the
// applier: committed source transactions, in commit order, each with the
// position to resume after it. The captures live in stream/pgstream
// (logical replication, pgoutput) and stream/mystream (the binlog in ROW
// format); the applier that writes them into the target, fenced and with
// the position committed in the same target transaction, is stream/apply.
package stream

import (
	"context"
	"errors"
	"time"
)

// Pos is a source position, as text: a PostgreSQL LSN ("0/16B3748"), or for
// MySQL/MariaDB "gtid:<set>" (MariaDB "0-1-100", MySQL "uuid:1-5") or
// "file:<name>:<offset>". "" is no position.
type Pos string

// Op is a row change's kind.
type Op byte

const (
	Insert Op = 'I'
	Update Op = 'U'
	Delete Op = 'D'
)

func (o Op) String() string {
	switch o {
	case Insert:
		return "insert"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return "op(" + string(o) + ")"
}

// Change is one row change of a source table.
//
// Values are the Go values the project's own pool to that source returns
// for the same column when it reads the row (keyset.Reader via
// database/sql), so that the copy's conversion for the target applies to
// them unchanged: a change's row and a copied row of the same source row
// are equal.
type Change struct {
	Schema, Table string   // the source table: PostgreSQL's namespace, MySQL's database
	Op            Op       //
	Columns       []string // the source's columns, in its order (every column)
	// Old is the row before an Update or a Delete, aligned with Columns:
	// PostgreSQL sends the replica identity's columns only (the others are
	// nil, and OldHas tells which were sent); MySQL the whole row.
	Old    []any
	OldHas []bool
	// New is the row after an Insert or an Update, aligned with Columns.
	New []any
	// Unchanged marks columns of New that the source did not send because
	// they did not change (PostgreSQL's unchanged TOAST values, 'u'): the
	// target keeps its value. nil: none.
	Unchanged []bool
}

// Tx is one committed source transaction.
type Tx struct {
	Changes []Change
	// End is the position to resume from after this transaction: reading
	// from End delivers the transactions committed after it, never it.
	End    Pos
	Commit time.Time // the source's commit time
	// Bytes is the size of the transaction in the source's log, where the
	// capture knows it (0 otherwise).
	Bytes int64
}

// Lag is how far the capture is behind the source's newest position.
type Lag struct {
	Bytes int64 // the source's log between the last transaction read and its end (-1: unknown)
	// Seconds is the age of the last transaction read: now minus its
	// commit time, 0 when the capture has read everything.
	Seconds float64
}

// Reader delivers committed transactions from a position on. A Tx may have
// no changes: the source moved on without a change of the plan's tables
// (another table's transaction, or an idle stream's keepalive); applying
// it moves the committed position, so that the source may free its log and
// a cutover sees the stream caught up.
type Reader interface {
	// Next returns the next committed transaction, waiting for one. It
	// returns ctx's error when ctx ends first.
	Next(ctx context.Context) (Tx, error)
	// Ack tells the source that every transaction up to and including the
	// one ending at pos is committed in the target: it may free its log up
	// to there. Only positions committed in the target are acknowledged.
	Ack(pos Pos)
	// Behind is the capture's lag now.
	Behind() Lag
	Close() error
}

// Capture is one source's change capture for a plan.
type Capture interface {
	// Start creates what capture needs at the source (PostgreSQL: the
	// publication of tables and the logical slot; MySQL: nothing) and
	// returns the position from which Open delivers every change
	// committed after Start returned. Starting again returns the first
	// start's position when the slot is still there.
	Start(ctx context.Context, tables [][2]string) (Pos, error)
	// Open reads from pos on (the last position committed in the target).
	// Its caller holds the stream's lease: a reader another instance left
	// open at the source (frozen, or cut off from the target) is ended.
	Open(ctx context.Context, pos Pos) (Reader, error)
	// Retained is how much of the source's log is kept for this capture
	// from pos (bytes; -1 unknown), and whether pos is still readable: a
	// purged binlog or a lost slot is ok=false.
	Retained(ctx context.Context, pos Pos) (bytes int64, ok bool, err error)
	// Current is the source's newest position now: once the stream's
	// committed position covers it (Covers), every change committed before
	// Current was called is in the target.
	Current(ctx context.Context) (Pos, error)
	// Covers reports whether have is at or past want: every transaction
	// before want is before have.
	Covers(have, want Pos) (bool, error)
	// Stop drops what Start created (the slot and the publication unless
	// keepSlot).
	Stop(ctx context.Context, keepSlot bool) error
}

// ErrGone is a position the source can no longer deliver (the binlog was
// purged, the slot dropped or invalidated): the stream cannot resume, and
// the tables must be copied again.
var ErrGone = errors.New("stream: the source no longer has the changes from the committed position")
