// Package cursor keeps each shard's resume point in the target database
// (SPEC §5 C1, C2). The checkpoint advances inside the batch's own
// transaction, so a committed batch and its cursor are one fact; a takeover
// reads it in the transaction that claims the fence.
package cursor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/fence"
)

// State is a shard's progress state.
type State string

// The states of SPEC §4.
const (
	Pending State = "pending"
	Running State = "running"
	Done    State = "done"
	Halted  State = "halted"
)

// ErrNoCheckpoint means the shard has no checkpoint row yet.
var ErrNoCheckpoint = errors.New("cursor: no checkpoint")

// ErrMoved means the stored cursor is not where this holder left it: the
// target lost batches it had committed (a crash of a server that does not
// flush each commit, a failover to a replica that lagged). The copy must
// go on from the stored cursor, not from the holder's memory.
var ErrMoved = errors.New("cursor: the stored cursor is not where this holder left it; the target lost committed batches")

// Checkpoint is the durable progress of one shard.
type Checkpoint struct {
	Shard     fence.Shard
	Lo, Hi    any    // shard bounds on the first key column; nil is open
	LastKey   []any  // nil before the first batch; parts decoded as strings (see DecodeKey)
	LastText  string // LastKey as stored: a JSON array, "" before the first batch
	RowsDone  int64
	Token     fence.Token // token of the last writer
	State     State
	UpdatedAt time.Time
}

// SQL is what the cursor needs from a dialect.
type SQL interface {
	CheckpointInit() string
	CheckpointRead(lock bool) string
	CheckpointAdvance() string
	CheckpointState() string
	CheckpointList() string
	CheckpointResume(byTable, byShard bool) string
}

// Store runs the checkpoint statements of one target dialect.
type Store struct {
	sql SQL
}

// New returns a Store using the statements of d.
func New(d SQL) *Store { return &Store{sql: d} }

// Init creates the shard's pending checkpoint with its bounds unless one
// exists; the first instance's bounds win. An existing checkpoint is only
// read, never locked: a holder's batch may hold it.
func (s *Store) Init(ctx context.Context, q fence.Querier, sh fence.Shard, lo, hi any) error {
	if _, err := s.Read(ctx, q, sh); err == nil {
		return nil
	}
	los, err := encodeBound(lo)
	if err != nil {
		return err
	}
	his, err := encodeBound(hi)
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, s.sql.CheckpointInit(), sh.Plan, sh.Table, sh.Index, los, his); err != nil {
		return fmt.Errorf("cursor: init %s: %w", sh, err)
	}
	return nil
}

func encodeBound(v any) (sql.NullString, error) {
	if v == nil {
		return sql.NullString{}, nil
	}
	s, err := EncodeKey([]any{v})
	return sql.NullString{String: s, Valid: err == nil}, err
}

func decodeBound(ns sql.NullString) (any, error) {
	if !ns.Valid {
		return nil, nil
	}
	k, err := DecodeKey(ns.String)
	if err != nil || len(k) != 1 {
		return nil, fmt.Errorf("cursor: bad bound %q: %v", ns.String, err)
	}
	return k[0], nil
}

// Read returns the shard's checkpoint, or ErrNoCheckpoint.
func (s *Store) Read(ctx context.Context, q fence.Querier, sh fence.Shard) (Checkpoint, error) {
	return s.read(ctx, q, sh, false)
}

// ReadForUpdate is Read as a locking read, for the takeover transaction
// (C2): it sees the previous holder's last commit and keeps the row.
func (s *Store) ReadForUpdate(ctx context.Context, q fence.Querier, sh fence.Shard) (Checkpoint, error) {
	return s.read(ctx, q, sh, true)
}

func (s *Store) read(ctx context.Context, q fence.Querier, sh fence.Shard, lock bool) (Checkpoint, error) {
	cp := Checkpoint{Shard: sh}
	var lo, hi, last sql.NullString
	var tok int64
	var state string
	err := q.QueryRowContext(ctx, s.sql.CheckpointRead(lock), sh.Plan, sh.Table, sh.Index).
		Scan(&lo, &hi, &last, &cp.RowsDone, &tok, &state, &cp.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return cp, fmt.Errorf("%w for %s", ErrNoCheckpoint, sh)
	}
	if err != nil {
		return cp, fmt.Errorf("cursor: read %s: %w", sh, err)
	}
	cp.Token, cp.State = fence.Token(tok), State(state)
	if cp.Lo, err = decodeBound(lo); err != nil {
		return cp, err
	}
	if cp.Hi, err = decodeBound(hi); err != nil {
		return cp, err
	}
	if last.Valid {
		cp.LastText = last.String
		if cp.LastKey, err = DecodeKey(last.String); err != nil {
			return cp, fmt.Errorf("cursor: %s: %w", sh, err)
		}
	}
	return cp, nil
}

// Advance moves the shard's cursor to lastKey with rowsDone rows copied in
// all, from prevDone where this holder left it. It must run in the batch's
// transaction, after the fence check. ErrMoved when the stored cursor is
// elsewhere.
func (s *Store) Advance(ctx context.Context, q fence.Querier, sh fence.Shard, lastKey []any, prevDone, rowsDone int64, t fence.Token) error {
	k, err := EncodeKey(lastKey)
	if err != nil {
		return fmt.Errorf("cursor: %s: %w", sh, err)
	}
	res, err := q.ExecContext(ctx, s.sql.CheckpointAdvance(), k, rowsDone, int64(t), sh.Plan, sh.Table, sh.Index, prevDone, rowsDone)
	if err != nil {
		return fmt.Errorf("cursor: advance %s to %s: %w", sh, k, err)
	}
	if err := oneRow(res, sh); errors.Is(err, ErrNoCheckpoint) {
		return fmt.Errorf("%w: %s was left at %d rows done by this holder", ErrMoved, sh, prevDone)
	} else if err != nil {
		return err
	}
	return nil
}

// SetState sets the shard's state, recording the writer's token.
func (s *Store) SetState(ctx context.Context, q fence.Querier, sh fence.Shard, st State, t fence.Token) error {
	res, err := q.ExecContext(ctx, s.sql.CheckpointState(), string(st), int64(t), sh.Plan, sh.Table, sh.Index)
	if err != nil {
		return fmt.Errorf("cursor: set %s %s: %w", sh, st, err)
	}
	return oneRow(res, sh)
}

func oneRow(res sql.Result, sh fence.Shard) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("cursor: %s: %w", sh, err)
	}
	if n != 1 {
		return fmt.Errorf("%w for %s", ErrNoCheckpoint, sh)
	}
	return nil
}

// Resume sets a plan's halted shards back to pending so instances take them
// up again: every table when table is "", every shard when shard < 0. It
// returns how many it resumed.
func (s *Store) Resume(ctx context.Context, q fence.Querier, plan, table string, shard int) (int64, error) {
	args := []any{plan}
	if table != "" {
		args = append(args, table)
	}
	if shard >= 0 {
		args = append(args, shard)
	}
	res, err := q.ExecContext(ctx, s.sql.CheckpointResume(table != "", shard >= 0), args...)
	if err != nil {
		return 0, fmt.Errorf("cursor: resume %s: %w", plan, err)
	}
	return res.RowsAffected()
}

// List returns every checkpoint of a plan, ordered by table and shard.
func (s *Store) List(ctx context.Context, q fence.Querier, plan string) ([]Checkpoint, error) {
	rows, err := q.QueryContext(ctx, s.sql.CheckpointList(), plan)
	if err != nil {
		return nil, fmt.Errorf("cursor: list %s: %w", plan, err)
	}
	defer rows.Close()
	var out []Checkpoint
	for rows.Next() {
		cp := Checkpoint{Shard: fence.Shard{Plan: plan}}
		var last sql.NullString
		var tok int64
		var state string
		if err := rows.Scan(&cp.Shard.Table, &cp.Shard.Index, &state, &cp.RowsDone, &last, &tok, &cp.UpdatedAt); err != nil {
			return nil, fmt.Errorf("cursor: list %s: %w", plan, err)
		}
		cp.Token, cp.State = fence.Token(tok), State(state)
		if last.Valid {
			cp.LastText = last.String
			if cp.LastKey, err = DecodeKey(last.String); err != nil {
				return nil, fmt.Errorf("cursor: %s: %w", cp.Shard, err)
			}
		}
		out = append(out, cp)
	}
	return out, rows.Err()
}
