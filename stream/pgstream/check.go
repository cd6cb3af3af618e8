package pgstream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Check reports what keeps the source behind db from being captured for
// tables with the slot slot, one error per failed check, each with its
// fix (for migrate validate): wal_level must be logical; every table must
// exist and have a primary key, or REPLICA IDENTITY FULL or USING INDEX;
// the user must have REPLICATION (or be superuser); a replication slot must
// be free unless slot already exists; and a WAL sender must be free. nil:
// every check passed.
func Check(ctx context.Context, db *sql.DB, tables [][2]string, slot string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf("pgstream: "+format, args...)) }

	var walLevel string
	if err := db.QueryRowContext(ctx, `SELECT current_setting('wal_level')`).Scan(&walLevel); err != nil {
		fail("read wal_level: %w", err)
	} else if walLevel != "logical" {
		fail("wal_level is %s, change capture needs logical: set wal_level = logical in postgresql.conf and restart the server", walLevel)
	}

	for _, t := range tables {
		if err := checkTable(ctx, db, t); err != nil {
			errs = append(errs, err)
		}
	}

	var user string
	var replicate bool
	if err := db.QueryRowContext(ctx, `SELECT rolname::text, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&user, &replicate); err != nil {
		fail("read the user's attributes: %w", err)
	} else if !replicate {
		fail("the user %s may not replicate: ALTER ROLE %s REPLICATION (as a superuser)", user, pgx.Identifier{user}.Sanitize())
	}

	var slots, used int
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT current_setting('max_replication_slots')::int,
  (SELECT count(*) FROM pg_replication_slots),
  EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).Scan(&slots, &used, &exists); err != nil {
		fail("read the replication slots: %w", err)
	} else if !exists && used >= slots {
		fail("no free replication slot for %s (max_replication_slots = %d, %d used): drop an unused slot with pg_drop_replication_slot, or raise max_replication_slots in postgresql.conf and restart", slot, slots, used)
	}

	var senders, active int
	if err := db.QueryRowContext(ctx, `SELECT current_setting('max_wal_senders')::int,
  (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender')`).Scan(&senders, &active); err != nil {
		fail("read the WAL senders: %w", err)
	} else if active >= senders {
		fail("no free WAL sender (max_wal_senders = %d, %d active): raise max_wal_senders in postgresql.conf and restart, or end an unused replication connection", senders, active)
	}
	return errs
}

// checkTable checks that a table exists and that its updates and deletes
// carry a key: a primary key with REPLICA IDENTITY DEFAULT, or FULL, or
// USING INDEX.
func checkTable(ctx context.Context, db *sql.DB, t [2]string) error {
	name := pgx.Identifier{t[0], t[1]}.Sanitize()
	var ident string
	var pk bool
	err := db.QueryRowContext(ctx, `SELECT c.relreplident::text,
  EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`, t[0], t[1]).Scan(&ident, &pk)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("pgstream: table %s does not exist in the source: create it or remove it from the plan", name)
	}
	if err != nil {
		return fmt.Errorf("pgstream: read the replica identity of %s: %w", name, err)
	}
	switch {
	case ident == "f" || ident == "i":
		return nil
	case ident == "d" && pk:
		return nil
	case ident == "n":
		return fmt.Errorf("pgstream: table %s has REPLICA IDENTITY NOTHING: its updates and deletes cannot be captured; run ALTER TABLE %s REPLICA IDENTITY FULL (or DEFAULT with a primary key)", name, name)
	}
	return fmt.Errorf("pgstream: table %s has no primary key: its updates and deletes cannot be captured; add a primary key, or run ALTER TABLE %s REPLICA IDENTITY FULL", name, name)
}
