package pgstream

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/migrate-dev/migrate/stream"
)

// Current implements stream.Capture: the position of a marker written at
// the source now, in a transaction whose commit is flushed. Every
// transaction committed before lies before the marker and is flushed with
// it, so logical decoding can send it: an application's commits with
// synchronous_commit off return before their WAL is written, and the
// server's write position (pg_current_wal_lsn) can be short of them.
// The marker is a transactional logical message, which pgoutput does not
// send (its messages option is off).
func (c *Capture) Current(ctx context.Context) (stream.Pos, error) {
	db, err := c.connect(ctx)
	if err != nil {
		return "", err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("pgstream: mark the source's position: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var lsn string
	if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
		return "", fmt.Errorf("pgstream: mark the source's position: %w", err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT pg_logical_emit_message(true, 'migrate', 'position')::text").Scan(&lsn); err != nil {
		return "", fmt.Errorf("pgstream: mark the source's position: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("pgstream: mark the source's position: %w", err)
	}
	return stream.Pos(lsn), nil
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
