// Package pgstream is PostgreSQL's change capture: logical replication with
// the pgoutput plugin, through a publication of the plan's tables and a
// logical replication slot named after the plan. It implements
// stream.Capture and stream.Reader.
//
// Start creates the publication, then the slot (the slot's consistent point
// is the position from which every later commit is delivered). Open starts
// replication from a position and decodes pgoutput (protocol version 1) into
// stream.Tx values whose row values are the Go values the project's own pool
// (pgx stdlib through database/sql) returns for the same columns. The server
// frees WAL only up to what the caller acknowledged with Ack: status updates
// carry the last acknowledged position, never what was merely received.
package pgstream

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/stream"
)

// maxIdent is PostgreSQL's identifier limit (NAMEDATALEN - 1) in bytes.
const maxIdent = 63

// statusInterval is how often a reader sends the server a status update
// (and asks for a keepalive in return) when nothing else made it send one.
// The keepalive's WAL end moves an idle stream's position on: a cutover
// waits for it after the application's last change (its catch-up time).
const statusInterval = 250 * time.Millisecond

// Capture is the change capture of one plan from one PostgreSQL database.
type Capture struct {
	dsn  plans.DSN
	name string // slot and publication
	// status is the status update interval of the readers it opens
	// (statusInterval; tests shorten it).
	status time.Duration
}

var (
	_ stream.Capture = (*Capture)(nil)
	_ stream.Reader  = (*Reader)(nil)
)

// New returns the capture of the plan named name from the database at dsn.
// Nothing is created before Start.
func New(dsn plans.DSN, name string) *Capture {
	return &Capture{dsn: dsn, name: objectName(name), status: statusInterval}
}

// Slot is the name of the plan's logical replication slot.
func (c *Capture) Slot() string { return c.name }

// Publication is the name of the plan's publication.
func (c *Capture) Publication() string { return c.name }

// objectName is "migrate_" and name lower-cased with every character but
// [a-z0-9_] replaced by '_'; when that changed name or made it longer than
// 63 bytes, it is cut and ends in '_' and 8 hex digits of name's SHA-256, so
// that two names differing only by what was replaced do not share a slot.
func objectName(name string) string {
	var b strings.Builder
	b.WriteString("migrate_")
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "migrate_"+name && len(s) <= maxIdent {
		return s
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if len(s) > maxIdent-len(suffix) {
		s = s[:maxIdent-len(suffix)]
	}
	return s + suffix
}

// connect opens a pool of the project's own kind to the source and checks
// that it connects, so that a connection failure is not taken for the
// failure of a statement.
func (c *Capture) connect(ctx context.Context) (*sql.DB, error) {
	db, err := dialect.Postgres{}.Open(c.dsn, dialect.Session{})
	if err != nil {
		return nil, fmt.Errorf("pgstream: open the source %s: %w", c.dsn, err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("pgstream: connect to the source %s: %w; check the DSN, the credentials and that the server is reachable", c.dsn, err)
	}
	return db, nil
}

// Start implements stream.Capture: it creates (or sets the tables of) the
// publication, then creates the logical slot with pgoutput unless it exists.
// It returns the new slot's consistent point, or the existing slot's
// confirmed_flush_lsn.
func (c *Capture) Start(ctx context.Context, tables [][2]string) (stream.Pos, error) {
	if len(tables) == 0 {
		return "", errors.New("pgstream: start: no tables to capture; name at least one table of the plan")
	}
	db, err := c.connect(ctx)
	if err != nil {
		return "", err
	}
	defer db.Close()

	list := make([]string, len(tables))
	for i, t := range tables {
		list[i] = pgx.Identifier{t[0], t[1]}.Sanitize()
	}
	pub := pgx.Identifier{c.name}.Sanitize()
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, c.name).Scan(&exists); err != nil {
		return "", fmt.Errorf("pgstream: start: read the publication %s: %w", c.name, err)
	}
	stmt := "CREATE PUBLICATION " + pub + " FOR TABLE " + strings.Join(list, ", ")
	if exists {
		stmt = "ALTER PUBLICATION " + pub + " SET TABLE " + strings.Join(list, ", ")
	}
	_, err = db.ExecContext(ctx, stmt)
	if pgErr := (*pgconn.PgError)(nil); !exists && errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505") { // another Start created it (duplicate_object, or the catalog's unique index when both inserted at once)
		_, err = db.ExecContext(ctx, "ALTER PUBLICATION "+pub+" SET TABLE "+strings.Join(list, ", "))
	}
	if err != nil {
		return "", fmt.Errorf("pgstream: start: publish %s as %s: %w (the tables must exist and the user must own them, or be superuser)",
			strings.Join(list, ", "), c.name, err)
	}

	if pos, ok, err := c.confirmed(ctx, db); err != nil || ok {
		return pos, err
	}
	var lsn string
	err = db.QueryRowContext(ctx, `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`, c.name).Scan(&lsn)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42710" { // duplicate_object: another Start won the race
		pos, ok, err := c.confirmed(ctx, db)
		if err == nil && !ok {
			err = fmt.Errorf("pgstream: start: the slot %s was created and dropped meanwhile; start again", c.name)
		}
		return pos, err
	}
	if err != nil {
		return "", fmt.Errorf("pgstream: start: create the logical replication slot %s: %w (the user needs the REPLICATION attribute, wal_level must be logical and max_replication_slots must have a free slot; migrate validate checks these)", c.name, err)
	}
	return stream.Pos(lsn), nil
}

// confirmed reads the slot's confirmed_flush_lsn; ok=false when the slot
// does not exist. A slot another Start is still creating (it has no
// confirmed position until its snapshot is consistent, which waits for the
// transactions running at the source) is waited for.
func (c *Capture) confirmed(ctx context.Context, db *sql.DB) (stream.Pos, bool, error) {
	var plugin, lsn sql.NullString
	for {
		err := db.QueryRowContext(ctx, `SELECT plugin, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, c.name).Scan(&plugin, &lsn)
		if errors.Is(err, sql.ErrNoRows) {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("pgstream: read the replication slot %s: %w", c.name, err)
		}
		if plugin.String != "pgoutput" || lsn.Valid {
			break
		}
		select {
		case <-ctx.Done():
			return "", false, fmt.Errorf("pgstream: the replication slot %s is being created by another session: %w", c.name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if plugin.String != "pgoutput" || !lsn.Valid {
		return "", false, fmt.Errorf("pgstream: the replication slot %s exists but is not a logical slot of pgoutput (plugin %q); drop it with SELECT pg_drop_replication_slot('%s') or rename the plan", c.name, plugin.String, c.name)
	}
	return stream.Pos(lsn.String), true, nil
}

// Retained implements stream.Capture: the WAL the slot holds back
// (pg_current_wal_lsn() - restart_lsn), ok=false when the slot is missing or
// its WAL was removed (wal_status 'lost').
func (c *Capture) Retained(ctx context.Context, pos stream.Pos) (int64, bool, error) {
	if pos != "" {
		if _, err := pglogrepl.ParseLSN(string(pos)); err != nil {
			return -1, false, fmt.Errorf("pgstream: retained: position %q is not a PostgreSQL LSN (like 0/16B3748)", pos)
		}
	}
	db, err := c.connect(ctx)
	if err != nil {
		return -1, false, err
	}
	defer db.Close()
	var bytes sql.NullInt64
	var status sql.NullString
	err = db.QueryRowContext(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, wal_status
FROM pg_replication_slots WHERE slot_name = $1`, c.name).Scan(&bytes, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, fmt.Errorf("pgstream: retained: read the replication slot %s: %w", c.name, err)
	}
	if status.String == "lost" || !bytes.Valid {
		return -1, false, nil
	}
	return bytes.Int64, true, nil
}

// Stop implements stream.Capture: it drops the slot (ending the walsender
// that still reads it) and the publication, unless keepSlot, which keeps
// both: a slot whose publication is gone cannot be read any more. Dropping
// what is already gone is no error.
func (c *Capture) Stop(ctx context.Context, keepSlot bool) error {
	if keepSlot {
		return nil
	}
	db, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := c.dropSlot(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{c.name}.Sanitize()); err != nil {
		return fmt.Errorf("pgstream: stop: drop the publication %s: %w", c.name, err)
	}
	return nil
}

// terminateReader ends the walsender reading the slot, if any.
func (c *Capture) terminateReader(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
WHERE slot_name = $1 AND active_pid IS NOT NULL`, c.name); err != nil {
		return fmt.Errorf("end the walsender reading the slot %s: %w (the user needs pg_signal_backend, or to be the role that reads it)", c.name, err)
	}
	return nil
}

// dropSlot drops the slot, terminating its walsender first when it is
// active, and retrying while the walsender is still on its way out.
func (c *Capture) dropSlot(ctx context.Context, db *sql.DB) error {
	const wait = 30 * time.Second
	deadline := time.Now().Add(wait)
	for {
		if err := c.terminateReader(ctx, db); err != nil {
			return fmt.Errorf("pgstream: stop: %w", err)
		}
		_, err := db.ExecContext(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, c.name)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "42704": // undefined_object: dropped meanwhile
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "55006" && time.Now().Before(deadline): // object_in_use
		default:
			return fmt.Errorf("pgstream: stop: drop the replication slot %s: %w", c.name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgstream: stop: drop the replication slot %s: %w", c.name, ctx.Err())
		case <-time.After(50 * time.Millisecond): // the terminated walsender releases the slot as it exits
		}
	}
}
