package dialect

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/migrate-dev/migrate/plans"
)

// Postgres is the dialect of PostgreSQL 15+. Detect tells it its server,
// whose binary forms decide what passthrough may copy (Passthrough).
type Postgres struct {
	Server PgServer
}

// PgServer is what a PostgreSQL server's binary forms depend on: its major
// version (server_version_num / 10000; 0 when not detected) and whether its
// date and time types are integers (integer_datetimes; always on since
// PostgreSQL 10).
type PgServer struct {
	Major            int
	IntegerDatetimes bool
}

// Detect implements Detector from server_version_num and integer_datetimes.
func (Postgres) Detect(ctx context.Context, db *sql.DB) (Dialect, error) {
	var s PgServer
	err := db.QueryRowContext(ctx, `SELECT current_setting('server_version_num')::int / 10000, current_setting('integer_datetimes') = 'on'`).
		Scan(&s.Major, &s.IntegerDatetimes)
	if err != nil {
		return nil, err
	}
	return Postgres{Server: s}, nil
}

// Engine implements Dialect.
func (Postgres) Engine() plans.Engine { return plans.Postgres }

// Open implements Dialect. Timeouts are set as startup parameters, so every
// connection of the pool carries them from its first statement.
func (Postgres) Open(dsn plans.DSN, s Session) (*sql.DB, error) {
	cfg, err := pgOpenConfig(dsn, s)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*cfg), nil
}

// pgOpenConfig is the config of Open's connections to dsn, with the session s.
func pgOpenConfig(dsn plans.DSN, s Session) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn.Secret())
	if err != nil {
		return nil, fmt.Errorf("postgres DSN %s: invalid", dsn) // pgx's text may quote the input
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "migrate"
	if s.IdleInTransaction > 0 {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = ms(s.IdleInTransaction)
	}
	if s.Statement > 0 {
		cfg.RuntimeParams["statement_timeout"] = ms(s.Statement)
	}
	if s.Lock > 0 {
		cfg.RuntimeParams["lock_timeout"] = ms(s.Lock)
	}
	if s.Lease {
		cfg.RuntimeParams["synchronous_commit"] = "on"
		cfg.RuntimeParams["default_transaction_isolation"] = "read committed"
	}
	return cfg, nil
}

func ms(d time.Duration) string {
	v := d.Milliseconds()
	if v < 1 {
		v = 1
	}
	return strconv.FormatInt(v, 10)
}

// Quote implements Dialect.
func (Postgres) Quote(ident ...string) string { return pgx.Identifier(ident).Sanitize() }

func (p Postgres) quoteList(cols []string) string { return quoteList(p, cols) }

// BoundTx implements Dialect with transaction-local settings.
func (Postgres) BoundTx(remaining time.Duration) (string, []any) {
	return `SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true),
  set_config('idle_in_transaction_session_timeout', $1, true)`, []any{ms(remaining)}
}

// BoundSession implements Dialect: BoundTx's settings, for the session.
func (Postgres) BoundSession(remaining time.Duration) (string, []any) {
	return `SELECT set_config('statement_timeout', $1, false), set_config('lock_timeout', $1, false),
  set_config('idle_in_transaction_session_timeout', $1, false)`, []any{ms(remaining)}
}

// ReadCommitted implements Dialect.
func (Postgres) ReadCommitted() string {
	return "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED"
}

// UnboundTx implements Dialect: BoundTx's settings end with the transaction.
func (Postgres) UnboundTx() string { return "" }
