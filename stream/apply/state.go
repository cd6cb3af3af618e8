// Package apply writes a change stream into the target with the guarantees
// of a copy batch: each target transaction begins with the fence check of
// the applier's lease, applies whole source transactions in commit order
// (upserts and deletes by business key), and advances the stream's
// position in the same transaction; a restart or a takeover reads from the
// committed position and replays at most the one transaction in flight.
// Every transaction that writes a table first counts itself in the table's
// row of _migrate_stream_table, whose lock orders it with the copy's
// batches (docs/streaming.md).
package apply

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/stream"
)

// The stream's states in _migrate_stream.
const (
	Following = "following" // the applier applies changes
	Stopping  = "stopping"  // cutover asked the applier to stop
	Stopped   = "stopped"   // the applier stopped: nothing more is applied
)

// Name is the stream's unit in the fence and lease namespace: no table has
// a shard -2, whatever its name (the post-load phase is -1).
const Name = "_stream"

// Unit is the plan's stream as a unit of work.
func Unit(plan string) fence.Shard { return fence.Shard{Plan: plan, Table: Name, Index: -2} }

// StateSQL is what reading and recording the stream's state needs.
type StateSQL interface {
	StreamInit() string
	StreamTableInit() string
	StreamRead(lock bool) string
	StreamState() string
	StreamApplied(lock bool) string
}

// State is a plan's stream as the target records it.
type State struct {
	Pos, StartPos stream.Pos
	State         string
	Txs, Changes  int64
	SourceCommit  time.Time // zero: none applied yet
	AppliedAt     time.Time // zero: none applied yet
	// Lag is the capture's lag when the applier last committed (as of
	// AppliedAt): LagBytes of the source's log (-1: unknown).
	Lag       time.Duration
	LagBytes  int64
	StartedAt time.Time
	Now       time.Time // the target's clock when read
}

// ErrNoStream is a plan whose stream was never started (no --follow run).
var ErrNoStream = errors.New("the plan has no change stream: run it with `migrate run --follow` first")

// Read reads the plan's stream; lock locks its row in tx.
func Read(ctx context.Context, q fence.Tx, s StateSQL, plan string, lock bool) (State, error) {
	var st State
	var pos, start string
	var commit, applied sql.NullTime
	var lagMs int64
	err := q.QueryRowContext(ctx, s.StreamRead(lock), plan).Scan(&pos, &start, &st.State, &st.Txs, &st.Changes, &commit, &applied, &lagMs, &st.LagBytes, &st.StartedAt, &st.Now)
	st.Lag = time.Duration(lagMs) * time.Millisecond
	if errors.Is(err, sql.ErrNoRows) {
		return st, ErrNoStream
	}
	if err != nil {
		return st, fmt.Errorf("read the stream of %s: %w", plan, err)
	}
	st.Pos, st.StartPos = stream.Pos(pos), stream.Pos(start)
	st.SourceCommit, st.AppliedAt = commit.Time, applied.Time
	return st, nil
}

// Init records the plan's stream at pos, and a row per target table (the
// names of the copy's checkpoints), unless they are recorded. The rows are
// read first, without a lock, and only those missing are inserted: on
// MySQL an INSERT IGNORE of a row that exists waits for the applier's lock
// on it (the state's row and the counts are locked by every applier
// transaction), and an instance starting beside a busy applier timed out.
func Init(ctx context.Context, q fence.Tx, s StateSQL, plan string, pos stream.Pos, tables []string) error {
	if _, err := Read(ctx, q, s, plan, false); errors.Is(err, ErrNoStream) {
		if _, err := q.ExecContext(ctx, s.StreamInit(), plan, string(pos)); err != nil {
			return fmt.Errorf("record the stream of %s: %w", plan, err)
		}
	} else if err != nil {
		return err
	}
	for _, t := range tables {
		if n, err := AppliedCount(ctx, q, s, plan, t, false); err != nil {
			return fmt.Errorf("read the stream's count of %s: %w", t, err)
		} else if n >= 0 {
			continue
		}
		if _, err := q.ExecContext(ctx, s.StreamTableInit(), plan, t); err != nil {
			return fmt.Errorf("record the stream of %s for %s: %w", plan, t, err)
		}
	}
	return nil
}

// SetState records the stream's state.
func SetState(ctx context.Context, q fence.Tx, s StateSQL, plan, state string) error {
	res, err := q.ExecContext(ctx, s.StreamState(), state, plan)
	if err != nil {
		return fmt.Errorf("set the stream of %s %s: %w", plan, state, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNoStream
	}
	return nil
}

// AppliedCount reads a table's applied count: the applier transactions that
// wrote it. With lock (in a copy batch's transaction), the row stays
// locked shared until the transaction ends, so no applier transaction
// writes the table meanwhile. A table the stream does not know counts -1.
func AppliedCount(ctx context.Context, q fence.Tx, s StateSQL, plan, table string, lock bool) (int64, error) {
	var n int64
	err := q.QueryRowContext(ctx, s.StreamApplied(lock), plan, table).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return -1, nil
	}
	return n, err
}
