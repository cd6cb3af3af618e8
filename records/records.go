// Package records keeps what holders publish about their shards in the
// target database, beside the checkpoints, by the database's clock: the
// takeover history, counted within a window (the runner halts a shard that
// keeps losing its holders) with the last takeover's details for status,
// and each holder's pace, kept for a while. Neither is a condition of
// recovery. It is the same whichever lock service grants the leases.
//
//	_migrate_takeover   (plan, tbl, shard, token, at, record): one row a takeover
//	_migrate_progress   (plan, tbl, shard, owner, rows_per_sec, eta_ms, table_rows,
//	                    kept_until): the holder's pace, published about once a second
package records

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
)

// Store reads and writes the records in the target database.
type Store struct {
	db  *sql.DB
	sql dialect.Records
}

// New is a Store on db, with the statements of its dialect.
func New(db *sql.DB, d dialect.Records) *Store { return &Store{db: db, sql: d} }

// keepAtLeast is how long a takeover is kept whatever the window: status
// shows the last one for a day.
const keepAtLeast = 24 * time.Hour

// RecordTakeover notes a takeover of shard s with token, by the database's
// clock, keeps record (the takeover's details, for status) for a day or
// the window if longer, and returns the number of takeovers within the
// window, this one included. A takeover recorded again (its token) counts
// once.
func (st *Store) RecordTakeover(ctx context.Context, s fence.Shard, token int64, window time.Duration, record string) (int64, error) {
	if window < time.Millisecond {
		return 0, fmt.Errorf("records: takeover window %v is below a millisecond", window)
	}
	if _, err := st.db.ExecContext(ctx, st.sql.TakeoverAdd(), s.Plan, s.Table, s.Index, token, record); err != nil {
		return 0, fmt.Errorf("records: record takeover of %s: %w", s, err)
	}
	keep := max(window, keepAtLeast)
	if _, err := st.db.ExecContext(ctx, st.sql.TakeoverPrune(), s.Plan, s.Table, s.Index, keep.Milliseconds()); err != nil {
		return 0, fmt.Errorf("records: prune takeovers of %s: %w", s, err)
	}
	n, _, err := st.Takeovers(ctx, s, window)
	return n, err
}

// NoteTakeover replaces the record of the takeover of s with token, once
// its RTO is known, without counting another takeover.
func (st *Store) NoteTakeover(ctx context.Context, s fence.Shard, token int64, record string) error {
	if _, err := st.db.ExecContext(ctx, st.sql.TakeoverNote(), record, s.Plan, s.Table, s.Index, token); err != nil {
		return fmt.Errorf("records: note takeover of %s: %w", s, err)
	}
	return nil
}

// Takeovers reads what RecordTakeover kept: the number of takeovers of s
// within the window, and the last one's record ("" when none is kept, or
// the target was set up by a version that kept them elsewhere: no table).
func (st *Store) Takeovers(ctx context.Context, s fence.Shard, window time.Duration) (int64, string, error) {
	var n int64
	err := st.db.QueryRowContext(ctx, st.sql.TakeoverCount(), s.Plan, s.Table, s.Index, window.Milliseconds()).Scan(&n)
	switch {
	case dialect.MissingTable(err):
		return 0, "", nil
	case err != nil:
		return 0, "", fmt.Errorf("records: count takeovers of %s: %w", s, err)
	}
	var last string
	err = st.db.QueryRowContext(ctx, st.sql.TakeoverLast(), s.Plan, s.Table, s.Index).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, "", fmt.Errorf("records: read the last takeover of %s: %w", s, err)
	}
	return n, last, nil
}

// Pace is what the holder of a shard publishes about its pace, for
// status: it is kept for a while unless published again.
type Pace struct {
	Owner      string  // the holder that measured it
	RowsPerSec float64 // rows committed per second, smoothed
	EtaMs      int64   // time left for the shard at that rate; -1 unknown
	TableRows  int64   // the source's estimate of the whole table's rows
}

// PublishPace replaces the pace record of s, kept for keep.
func (st *Store) PublishPace(ctx context.Context, s fence.Shard, p Pace, keep time.Duration) error {
	_, err := st.db.ExecContext(ctx, st.sql.ProgressPut(), s.Plan, s.Table, s.Index, p.Owner, p.RowsPerSec, p.EtaMs, p.TableRows, max(keep.Milliseconds(), 1))
	if err != nil {
		return fmt.Errorf("records: publish progress of %s: %w", s, err)
	}
	return nil
}

// ReadPace reads what PublishPace kept; ok is false when nothing is
// (no holder published within its keep time, or no table yet).
func (st *Store) ReadPace(ctx context.Context, s fence.Shard) (p Pace, ok bool, err error) {
	err = st.db.QueryRowContext(ctx, st.sql.ProgressGet(), s.Plan, s.Table, s.Index).Scan(&p.Owner, &p.RowsPerSec, &p.EtaMs, &p.TableRows)
	switch {
	case errors.Is(err, sql.ErrNoRows), dialect.MissingTable(err):
		return Pace{}, false, nil
	case err != nil:
		return Pace{}, false, fmt.Errorf("records: read progress of %s: %w", s, err)
	}
	return p, true, nil
}
