package fence_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// lease is a lease held for the whole test: the real lease is tested in
// package lock; here only its identity and its two signals matter.
type lease struct {
	ctx      context.Context
	deadline time.Time
	token    int64
	owner    string
}

func newLease(t testing.TB, token int64, owner string) *lease {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &lease{ctx: ctx, deadline: time.Now().Add(time.Hour), token: token, owner: owner}
}

func (l *lease) Context() context.Context { return l.ctx }
func (l *lease) Deadline() time.Time      { return l.deadline }
func (l *lease) Token() int64             { return l.token }
func (l *lease) Owner() string            { return l.owner }

// openPostgres is a fresh PostgreSQL target with the helper tables, its
// pool carrying the timeouts of a 30s lease.
func openPostgres(t *testing.T) (*sql.DB, *fence.Fence) {
	dsn, err := plans.ParseDSN(testsvc.NewPostgresDB(t))
	if err != nil {
		t.Fatal(err)
	}
	d := dialect.Postgres{}
	db, err := d.Open(dsn, dialect.SessionFor(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for _, q := range d.Helpers() {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return db, fence.New(d)
}

// F3: a transaction begun under a lease is aborted by the server itself at
// the lease's local deadline when its holder freezes inside it, so it cannot
// stall a successor's claim until the holder wakes up.
func TestBegin_FrozenHolderAbortedByDeadline(t *testing.T) {
	db, f := openPostgres(t)
	if err := inTx(t, db, func(tx *sql.Tx) error { return f.Claim(t.Context(), tx, shard, 1, "holder") }); err != nil {
		t.Fatal(err)
	}
	l := newLease(t, 1, "holder")
	l.deadline = time.Now().Add(700 * time.Millisecond)
	tx, tctx, cancel, err := fence.Begin(db, dialect.Postgres{}, l)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	var idle, stmt string
	if err := tx.QueryRowContext(tctx, `SELECT current_setting('idle_in_transaction_session_timeout'), current_setting('statement_timeout')`).Scan(&idle, &stmt); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{idle, stmt} {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 || d > 700*time.Millisecond {
			t.Errorf("server-side timeout %q inside the transaction, want at most the 700ms left on the lease", v)
		}
	}
	if err := f.CheckLease(tctx, tx, shard, l); err != nil {
		t.Fatal(err)
	}
	// The holder freezes here, the watermark row locked. A successor claims:
	// it gets the row only once the frozen transaction has ended, which
	// nothing but the lease's bound does (30s: it never was).
	start := time.Now()
	ctx, cancelClaim := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancelClaim()
	claim, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Claim(ctx, claim, shard, 2, "successor"); err != nil {
		t.Fatalf("the successor's claim (after %v): %v; the frozen holder's transaction was not aborted at its deadline", time.Since(start), err)
	}
	if err := claim.Commit(); err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	// The server's bounds are whole milliseconds of the time left.
	if early := time.Until(l.deadline); early > 5*time.Millisecond {
		t.Errorf("the claim got the watermark row %v before the frozen holder's deadline", early)
	}
	if err := tx.Commit(); err == nil {
		t.Error("the frozen holder's transaction committed after its deadline")
	}
	t.Logf("successor's claim waited %v for a holder frozen with 700ms of lease left", waited)
}
