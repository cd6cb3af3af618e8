// Package fence is the resource layer of recovery: the target database
// itself refuses a writer whose fencing token is not the newest (SPEC §5 F1,
// F2). A watermark row per shard holds the highest token seen and the owner
// that claimed it; a takeover claims it strictly, and every batch transaction
// begins by locking it and checking it still holds exactly (token, owner).
package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
)

// Token is a fencing token: issued by the lease, larger than any before it.
type Token int64

// String implements fmt.Stringer.
func (t Token) String() string { return strconv.FormatInt(int64(t), 10) }

// Shard names one unit of leased work: a key range of one table of a plan.
type Shard struct {
	Plan  string
	Table string // the target table name of the plan
	Index int
}

// String implements fmt.Stringer.
func (s Shard) String() string { return s.Plan + "/" + s.Table + "#" + strconv.Itoa(s.Index) }

// ErrStale means a newer token holds the shard: the writer must roll back and
// stop writing.
var ErrStale = errors.New("fence: stale token")

// StaleError carries the facts of a refusal. errors.Is(err, ErrStale).
type StaleError struct {
	Shard     Shard
	Token     Token  // the refused writer's token
	Owner     string // the refused writer
	Watermark Token  // the token the target holds
	Holder    string // the owner that claimed the watermark
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: %s: token %d of %s refused, the target holds token %d of %s",
		e.Shard, e.Token, e.Owner, e.Watermark, e.Holder)
}

// Unwrap makes errors.Is(err, ErrStale) true.
func (e *StaleError) Unwrap() error { return ErrStale }

// SQL is what the fence needs from a dialect.
type SQL interface {
	FenceClaim() string
	FenceFloor() string
	FenceCheck() string
	FenceRead() string
	FenceBreak() string
	FenceEnd() string
}

// Tx is what the fence needs from a transaction (*sql.Tx satisfies it).
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Querier is a Tx that also reads rows (*sql.DB satisfies it), for Break.
type Querier interface {
	Tx
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Fence runs the watermark statements of one target dialect.
type Fence struct {
	sql SQL
}

// New returns a Fence using the statements of d.
func New(d SQL) *Fence { return &Fence{sql: d} }

// Claim raises the shard's watermark to t for owner, strictly: it succeeds
// only when t is above the watermark (C2, L4). It waits for any in-flight
// transaction of the previous holder, which holds the row locked. On refusal
// it returns a *StaleError naming the watermark.
func (f *Fence) Claim(ctx context.Context, tx Tx, s Shard, t Token, owner string) error {
	res, err := tx.ExecContext(ctx, f.sql.FenceClaim(), s.Plan, s.Table, s.Index, int64(t), owner)
	if err != nil {
		return fmt.Errorf("fence: claim %s with token %d: %w", s, t, err)
	}
	return f.verdict(ctx, tx, res, s, t, owner)
}

// Floor sets the watermark of a shard that has no watermark yet to t, with
// no owner, so that its first claim must be above t; a shard with a
// watermark keeps it. A plan's shards start above the tokens already in
// the rows of their table (an earlier plan's, on a re-shard): the rows'
// fence column only lets an equal or newer token overwrite them.
func (f *Fence) Floor(ctx context.Context, tx Tx, s Shard, t Token) error {
	if _, err := tx.ExecContext(ctx, f.sql.FenceFloor(), s.Plan, s.Table, s.Index, int64(t)); err != nil {
		return fmt.Errorf("fence: floor %s at token %d: %w", s, t, err)
	}
	return nil
}

// Check locks the watermark row for the rest of the transaction and verifies
// it holds exactly (t, owner). Every batch transaction starts with it (F1).
func (f *Fence) Check(ctx context.Context, tx Tx, s Shard, t Token, owner string) error {
	res, err := tx.ExecContext(ctx, f.sql.FenceCheck(), s.Plan, s.Table, s.Index, int64(t), owner)
	if err != nil {
		return fmt.Errorf("fence: check %s with token %d: %w", s, t, err)
	}
	return f.verdict(ctx, tx, res, s, t, owner)
}

func (f *Fence) verdict(ctx context.Context, tx Tx, res sql.Result, s Shard, t Token, owner string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fence: %s: %w", s, err)
	}
	if n >= 1 { // MySQL reports 2 for an ON DUPLICATE KEY UPDATE that changed a row
		return nil
	}
	stale := &StaleError{Shard: s, Token: t, Owner: owner}
	w, holder, err := f.Watermark(ctx, tx, s)
	if err != nil {
		return errors.Join(stale, err)
	}
	stale.Watermark, stale.Holder = w, holder
	return stale
}

// Break ends the sessions of migrate that hold the shard's watermark row
// in an open transaction (see dialect's FenceBreak) and returns how many
// it ended; 0 on a dialect that needs none. A successor runs it outside
// its claim's transaction, just before it: those sessions belong to
// holders whose lease ended, so all they can do is make it wait. Each is
// ended by End, which leaves it alone if it has finished that transaction
// since it was listed.
func (f *Fence) Break(ctx context.Context, q Querier, s Shard) (int64, error) {
	stmt := f.sql.FenceBreak()
	if stmt == "" {
		return 0, nil
	}
	holders, err := f.Holders(ctx, q, s)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, h := range holders {
		ended, err := f.End(ctx, q, h)
		if err != nil {
			return n, fmt.Errorf("fence: end the session %d that held %s: %w", h.PID, s, err)
		}
		if ended {
			n++
		}
	}
	return n, nil
}

// Holder is a session that held a watermark row locked, in the
// transaction Xact (an xid8, as text), when Break looked.
type Holder struct {
	PID  int64
	Xact string
}

// Holders lists the sessions that hold s's watermark row in an open
// transaction (none on a dialect that needs no Break).
func (f *Fence) Holders(ctx context.Context, q Querier, s Shard) ([]Holder, error) {
	stmt := f.sql.FenceBreak()
	if stmt == "" {
		return nil, nil
	}
	rows, err := q.QueryContext(ctx, stmt, s.Plan, s.Table, s.Index)
	if err != nil {
		return nil, fmt.Errorf("fence: the sessions that hold %s: %w", s, err)
	}
	defer rows.Close()
	var out []Holder
	for rows.Next() {
		var h Holder
		if err := rows.Scan(&h.PID, &h.Xact); err != nil {
			return nil, fmt.Errorf("fence: the sessions that hold %s: %w", s, err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// End ends h's session if it still runs the transaction it held the row
// in, and says whether it did.
func (f *Fence) End(ctx context.Context, q Querier, h Holder) (bool, error) {
	var ended bool
	err := q.QueryRowContext(ctx, f.sql.FenceEnd(), h.PID, h.Xact).Scan(&ended)
	return ended, err
}

// Watermark reads the shard's watermark; zero and "" when none was claimed.
func (f *Fence) Watermark(ctx context.Context, q Tx, s Shard) (Token, string, error) {
	var w int64
	var holder string
	err := q.QueryRowContext(ctx, f.sql.FenceRead(), s.Plan, s.Table, s.Index).Scan(&w, &holder)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("fence: read watermark of %s: %w", s, err)
	}
	return Token(w), holder, nil
}
