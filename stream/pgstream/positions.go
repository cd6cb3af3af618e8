package pgstream

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/migrate-dev/migrate/stream"
)

// Current implements stream.Capture: the server's WAL insert position.
func (c *Capture) Current(ctx context.Context) (stream.Pos, error) {
	db, err := c.connect(ctx)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var lsn string
	if err := db.QueryRowContext(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return "", fmt.Errorf("pgstream: read the WAL position: %w", err)
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
