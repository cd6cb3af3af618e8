package dblock_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/lock/dblock"
	"github.com/migrate-dev/migrate/lock/locktest"
	"github.com/migrate-dev/migrate/plans"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestConformance runs the lock contract's suite against a lease table in
// a real PostgreSQL and a real MariaDB, and restarts a private PostgreSQL
// under a held lease (crashed and started again; "without its data": the
// lease table emptied too, as a restore from a backup older than the
// leases would leave it).
func TestConformance(t *testing.T) {
	for _, e := range testsvc.Engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			dbURL := e.NewDB(t)
			u, err := url.Parse(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			admin := open(t, dbURL)
			h := locktest.Harness{
				Addr: u.Host,
				Open: func(t *testing.T, addr string, _ time.Duration) lock.Backend { return backend(t, at(dbURL, addr)) },
				Tamper: func(t *testing.T, base string) {
					if _, err := admin.db.ExecContext(t.Context(), admin.d.LeaseRelease(), base, ownerOf(t, admin, base), tokenOf(t, admin, base)); err != nil {
						t.Fatal(err)
					}
				},
			}
			if e.Name == "postgres" {
				h.Private = func(t *testing.T) locktest.Private {
					// A private server with a database of the test's name,
					// which Open points at whatever the address.
					p := privatePG{testsvc.StartPostgres(t), t}
					if _, err := open(t, p.URL).db.ExecContext(t.Context(), "CREATE DATABASE "+admin.d.Quote(u.Path[1:])); err != nil {
						t.Fatal(err)
					}
					p.URL = at(dbURL, p.Addr())
					return p
				}
			}
			locktest.Run(t, h)
		})
	}
}

// conn is a database pool with its dialect, closed when the test ends.
type conn struct {
	db *sql.DB
	d  dialect.Dialect
}

func open(t *testing.T, rawURL string) conn {
	t.Helper()
	c := connect(t, rawURL, dialect.Session{})
	t.Cleanup(func() { _ = c.db.Close() })
	return c
}

// backend is a Backend on rawURL, its session the CLI's (durable commits,
// READ COMMITTED: dialect.Session.Lease); the suite closes it.
func backend(t *testing.T, rawURL string) lock.Backend {
	t.Helper()
	c := connect(t, rawURL, dialect.Session{Lease: true})
	dsn, _ := plans.ParseDSN(rawURL) // connect parsed it
	return dblock.New(c.db, c.d, dsn.String(), slog.New(slog.NewTextHandler(t.Output(), nil)))
}

// connect opens a pool on rawURL, for its caller to close.
func connect(t *testing.T, rawURL string, s dialect.Session) conn {
	t.Helper()
	dsn, err := plans.ParseDSN(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dialect.For(dsn.Engine())
	if err != nil {
		t.Fatal(err)
	}
	// Not the test's context: the suite also opens backends in cleanups.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, d, err := dialect.Open(ctx, d, dsn, s)
	if err != nil {
		t.Fatal(err)
	}
	return conn{db, d}
}

// at is rawURL with its host:port replaced by addr.
func at(rawURL, addr string) string {
	u, _ := url.Parse(rawURL)
	u.Host = addr
	return u.String()
}

func ownerOf(t *testing.T, c conn, base string) string {
	var owner string
	if err := c.db.QueryRowContext(t.Context(), "SELECT owner FROM "+c.d.Quote(dialect.LeaseTable)+" WHERE name = "+ph(c, 1), base).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	return owner
}

func tokenOf(t *testing.T, c conn, base string) int64 {
	var token int64
	if err := c.db.QueryRowContext(t.Context(), "SELECT token FROM "+c.d.Quote(dialect.LeaseTable)+" WHERE name = "+ph(c, 1), base).Scan(&token); err != nil {
		t.Fatal(err)
	}
	return token
}

func ph(c conn, i int) string {
	if c.d.Engine() == plans.MySQL {
		return "?"
	}
	return "$" + string(rune('0'+i))
}

// privatePG is a private PostgreSQL whose leases the suite restarts.
type privatePG struct {
	*testsvc.PostgresServer
	t *testing.T
}

func (p privatePG) Addr() string {
	u, _ := url.Parse(p.URL)
	return u.Host
}

func (p privatePG) Restart() {
	p.Crash()
	p.Start()
}

// RestartWiped loses the leases, not the database the suite's tests use.
func (p privatePG) RestartWiped() {
	p.Restart()
	c := open(p.t, p.URL)
	if _, err := c.db.ExecContext(p.t.Context(), "DELETE FROM "+c.d.Quote(dialect.LeaseTable)); err != nil {
		p.t.Fatal(err)
	}
}

// TestFirstGrants: instances started together on a target that has no
// lease table yet all create it and are answered (one granted, the others
// held off), none failing on the others' CREATE TABLE (PostgreSQL's
// CREATE TABLE IF NOT EXISTS run concurrently fails all but one with a
// unique violation in its catalog) or on a server default of SERIALIZABLE.
func TestFirstGrants(t *testing.T) {
	for _, e := range testsvc.Engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			dbURL := e.NewDB(t)
			admin := open(t, dbURL)
			if e.Name == "postgres" {
				// A server whose default is SERIALIZABLE: the lease's
				// sessions still run at READ COMMITTED, so the grants
				// racing on one row are answered, not refused.
				u, _ := url.Parse(dbURL)
				if _, err := admin.db.ExecContext(t.Context(), "ALTER DATABASE "+admin.d.Quote(u.Path[1:])+" SET default_transaction_isolation = 'serializable'"); err != nil {
					t.Fatal(err)
				}
			}
			const instances = 6
			for round := range 10 {
				if _, err := admin.db.ExecContext(t.Context(), admin.d.DropTable([]string{dialect.LeaseTable})); err != nil {
					t.Fatal(err)
				}
				backends := make([]lock.Backend, instances)
				for i := range backends {
					backends[i] = backend(t, dbURL)
					t.Cleanup(func() { _ = backends[i].Close() })
					// Connected before the race, so that they create
					// together.
					if err := backends[i].Ping(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				grants := make([]lock.Grant, instances)
				errs := make([]error, instances)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i, b := range backends {
					wg.Go(func() {
						<-start
						grants[i], errs[i] = b.Acquire(t.Context(), "migrate:{first}", "owner-"+strconv.Itoa(i), time.Minute)
					})
				}
				close(start)
				wg.Wait()
				granted := 0
				for i := range grants {
					if errs[i] != nil {
						t.Fatalf("round %d: instance %d: %v", round, i, errs[i])
					}
					if grants[i].Status == lock.Granted {
						granted++
					}
				}
				if granted != 1 {
					t.Fatalf("round %d: %d grants, want 1: %+v", round, granted, grants)
				}
			}
		})
	}
}
