package pgstream

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/migrate-dev/migrate/stream"
)

// Current implements stream.Capture: a WAL position at or past the end of
// every transaction committed before the call. A transaction committed with
// synchronous_commit off returns before its WAL is written, so the write
// and flush positions (pg_current_wal_lsn, what the stream can read) may
// still be behind its commit: a cutover taking that for the source's end
// would stop the stream before its last changes. So Current reads the
// insert position first (past every commit), then waits for the server's
// WAL writer to flush that far, and returns the flush position: a record's
// end or a page's, which the stream reaches (the insert position itself
// may lie past a page header no record ends at).
func (c *Capture) Current(ctx context.Context) (stream.Pos, error) {
	db, err := c.connect(ctx)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var ins string
	if err := db.QueryRowContext(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&ins); err != nil {
		return "", fmt.Errorf("pgstream: read the WAL position: %w", err)
	}
	for {
		var lsn string
		var flushed bool
		if err := db.QueryRowContext(ctx, "SELECT pg_current_wal_flush_lsn()::text, pg_current_wal_flush_lsn() >= $1::pg_lsn", ins).Scan(&lsn, &flushed); err != nil {
			return "", fmt.Errorf("pgstream: read the WAL position: %w", err)
		}
		if flushed {
			return stream.Pos(lsn), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("pgstream: wait for the WAL to be flushed up to %s: %w", ins, ctx.Err())
		case <-time.After(10 * time.Millisecond): // the WAL writer flushes within 3 × wal_writer_delay
		}
	}
}

// Covers implements stream.Capture: LSNs compare as numbers.
func (c *Capture) Covers(have, want stream.Pos) (bool, error) {
	h, err := pglogrepl.ParseLSN(string(have))
	if err != nil {
		return false, fmt.Errorf("pgstream: position %q: %w", have, err)
	}
	w, err := pglogrepl.ParseLSN(string(want))
	if err != nil {
		return false, fmt.Errorf("pgstream: position %q: %w", want, err)
	}
	return h >= w, nil
}
