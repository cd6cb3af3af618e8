package dialect_test

import (
	"context"
	"database/sql"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestClassify: real errors from both servers and the network fall into
// the right class, and data errors name their column where the server does.
func TestClassify(t *testing.T) {
	ctx := t.Context()
	pg := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	my, _ := openMySQL(t)
	for _, q := range []string{`CREATE TABLE t (id int PRIMARY KEY, c varchar(3), n int NOT NULL DEFAULT 0, CHECK (n >= 0))`} {
		if _, err := pg.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
		if _, err := my.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(db *sql.DB, q string, args ...any) error { _, err := db.ExecContext(ctx, q, args...); return err }
	pgCopy := func(data string) error {
		conn, err := pg.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.Raw(func(dc any) error {
			_, err := dc.(*stdlib.Conn).Conn().PgConn().CopyFrom(ctx, strings.NewReader(data), `COPY t (id, c) FROM STDIN`)
			return err
		})
	}
	// A connection killed by the server: the next statement on it fails.
	killed := func(db *sql.DB, idQuery, kill string) error {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var id int64
		if err := conn.QueryRowContext(ctx, idQuery).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, kill, id); err != nil {
			t.Fatal(err)
		}
		_, err = conn.ExecContext(ctx, "SELECT 1")
		return err
	}
	// A session the server ended for idling in a transaction (a frozen
	// client): the next statement fails; a new connection works.
	idleKilled := func() error {
		conn, err := pg.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, q := range []string{`SET idle_in_transaction_session_timeout = '100ms'`, `BEGIN`} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(400 * time.Millisecond)
		_, err = conn.ExecContext(ctx, "SELECT 1")
		return err
	}
	refused := func(engine plans.Engine, url string) error {
		dsn, err := plans.ParseDSN(url)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := dialect.For(engine)
		db, err := d.Open(dsn, dialect.Session{})
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	}
	addr := closedPort(t)
	for _, c := range []struct {
		name   string
		err    error
		class  dialect.Class
		column string
	}{
		{"pg value too long", exec(pg, `INSERT INTO t (id, c) VALUES (1, 'abcd')`), dialect.Data, ""},
		{"pg not null", exec(pg, `INSERT INTO t (id, c, n) VALUES (1, 'a', NULL)`), dialect.Data, "n"},
		{"pg check", exec(pg, `INSERT INTO t (id, n) VALUES (1, -1)`), dialect.Data, ""},
		{"pg out of range", exec(pg, `INSERT INTO t (id, n) VALUES (1, 3000000000)`), dialect.Data, ""},
		{"pg copy too long", pgCopy("1\tabcd\n"), dialect.Data, "c"},
		{"pg unique", func() error {
			_ = exec(pg, `INSERT INTO t (id) VALUES (7)`)
			return exec(pg, `INSERT INTO t (id) VALUES (7)`)
		}(), dialect.Other, ""},
		{"pg syntax", exec(pg, `SELEC 1`), dialect.Other, ""},
		{"pg terminated", killed(pg, `SELECT pg_backend_pid()`, `SELECT pg_terminate_backend($1)`), dialect.Unavailable, ""},
		{"pg idle in transaction timeout", idleKilled(), dialect.Unavailable, ""},
		{"pg refused", refused(plans.Postgres, "postgres://u:p@"+addr+"/db?sslmode=disable&connect_timeout=2"), dialect.Unavailable, ""},
		{"mysql data too long", exec(my, `INSERT INTO t (id, c) VALUES (1, 'abcd')`), dialect.Data, "c"},
		{"mysql not null", exec(my, `INSERT INTO t (id, c, n) VALUES (1, 'a', NULL)`), dialect.Data, "n"},
		{"mysql out of range", exec(my, `INSERT INTO t (id, n) VALUES (1, 3000000000)`), dialect.Data, "n"},
		{"mysql check", exec(my, `INSERT INTO t (id, n) VALUES (1, -1)`), dialect.Data, ""},
		{"mysql duplicate", func() error {
			_ = exec(my, `INSERT INTO t (id) VALUES (7)`)
			return exec(my, `INSERT INTO t (id) VALUES (7)`)
		}(), dialect.Other, ""},
		{"mysql killed", killed(my, `SELECT CONNECTION_ID()`, `KILL ?`), dialect.Unavailable, ""},
		{"mysql refused", refused(plans.MySQL, "mysql://u:p@"+addr+"/db?timeout=2s"), dialect.Unavailable, ""},
		{"canceled", context.Canceled, dialect.Other, ""},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if got := dialect.Classify(c.err); got != c.class {
			t.Errorf("%s: %v is %v, want %v", c.name, c.err, got, c.class)
		}
		if c.class == dialect.Data {
			if got := dialect.ErrorColumn(c.err); got != c.column {
				t.Errorf("%s: column %q from %v, want %q", c.name, got, c.err, c.column)
			}
		}
	}
}

// TestClassify_TLS: a certificate the client rejects is not an outage (it
// would be waited for max_outage at every start).
func TestClassify_TLS(t *testing.T) {
	pgURL := testsvc.PostgresURL(t)
	dsn, err := plans.ParseDSN(strings.Replace(pgURL, "sslmode=disable", "sslmode=require", 1))
	if err != nil {
		t.Fatal(err)
	}
	db, err := dialect.Postgres{}.Open(dsn, dialect.Session{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.PingContext(t.Context()) // the shared server has no TLS
	if err == nil || dialect.Classify(err) != dialect.Other {
		t.Errorf("TLS refused: %v is %v, want other", err, dialect.Classify(err))
	}
}

// TestLockTimeout: a lock wait the server ended is told apart from other
// errors on both engines (a takeover's claim waits so for a frozen holder's
// transaction, and keeps waiting instead of counting a failure).
func TestLockTimeout(t *testing.T) {
	ctx := t.Context()
	pg := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	my, _ := openMySQL(t)
	for _, c := range []struct {
		name  string
		db    *sql.DB
		bound string
	}{
		{"postgres", pg, `SET lock_timeout = '200ms'`},
		{"mysql", my, `SET SESSION innodb_lock_wait_timeout = 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.db.ExecContext(ctx, `CREATE TABLE w (id int PRIMARY KEY, v int)`); err != nil {
				t.Fatal(err)
			}
			if _, err := c.db.ExecContext(ctx, `INSERT INTO w VALUES (1, 0)`); err != nil {
				t.Fatal(err)
			}
			holder, err := c.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = holder.Rollback() }()
			if _, err := holder.ExecContext(ctx, `UPDATE w SET v = 1 WHERE id = 1`); err != nil {
				t.Fatal(err)
			}
			conn, err := c.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, c.bound); err != nil {
				t.Fatal(err)
			}
			_, err = conn.ExecContext(ctx, `UPDATE w SET v = 2 WHERE id = 1`)
			if err == nil || !dialect.LockTimeout(err) {
				t.Errorf("waiting on a held row: %v, want a lock timeout", err)
			}
			_, err = conn.ExecContext(ctx, `SELEC 1`)
			if dialect.LockTimeout(err) {
				t.Errorf("%v is not a lock timeout", err)
			}
		})
	}
}
