package fence_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// forEachTarget runs fn against a fresh database of every engine with the
// helper tables, through pools carrying the F3 timeouts of a lease TTL.
func forEachTarget(t *testing.T, ttl time.Duration, fn func(t *testing.T, db *sql.DB, f *fence.Fence, d dialect.Dialect)) {
	for _, e := range testsvc.Engines {
		t.Run(e.Name, func(t *testing.T) {
			dsn, err := plans.ParseDSN(e.NewDB(t))
			if err != nil {
				t.Fatal(err)
			}
			d, err := dialect.For(dsn.Engine())
			if err != nil {
				t.Fatal(err)
			}
			db, d, err := dialect.Open(t.Context(), d, dsn, dialect.SessionFor(ttl))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			for _, q := range d.Helpers() {
				if _, err := db.ExecContext(t.Context(), q); err != nil {
					t.Fatal(err)
				}
			}
			fn(t, db, fence.New(d), d)
		})
	}
}

func inTx(t *testing.T, db *sql.DB, fn func(tx *sql.Tx) error) error {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

var shard = fence.Shard{Plan: "p", Table: "orders", Index: 0}

func TestFence_Claim(t *testing.T) {
	forEachTarget(t, 30*time.Second, testClaim)
}

func testClaim(t *testing.T, db *sql.DB, f *fence.Fence, _ dialect.Dialect) {
	claim := func(tok fence.Token, owner string) error {
		return inTx(t, db, func(tx *sql.Tx) error { return f.Claim(t.Context(), tx, shard, tok, owner) })
	}
	if err := claim(5, "a"); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	for _, c := range []struct {
		name  string
		tok   fence.Token
		owner string
	}{{"equal token, other owner", 5, "b"}, {"equal token, same owner", 5, "a"}, {"lower token", 4, "b"}} {
		t.Run(c.name, func(t *testing.T) {
			err := claim(c.tok, c.owner)
			var st *fence.StaleError
			if !errors.As(err, &st) || !errors.Is(err, fence.ErrStale) {
				t.Fatalf("claim(%d, %s) = %v, want a StaleError", c.tok, c.owner, err)
			}
			if st.Watermark != 5 || st.Holder != "a" {
				t.Errorf("refusal names watermark %d of %q, want 5 of a", st.Watermark, st.Holder)
			}
		})
	}
	if err := claim(6, "b"); err != nil {
		t.Fatalf("higher claim: %v", err)
	}
	w, holder, err := f.Watermark(t.Context(), db, shard)
	if err != nil || w != 6 || holder != "b" {
		t.Fatalf("watermark = %d %q %v, want 6 b", w, holder, err)
	}
}

func TestFence_Check(t *testing.T) {
	forEachTarget(t, 30*time.Second, testCheck)
}

func testCheck(t *testing.T, db *sql.DB, f *fence.Fence, _ dialect.Dialect) {
	check := func(tok fence.Token, owner string) error {
		return inTx(t, db, func(tx *sql.Tx) error { return f.Check(t.Context(), tx, shard, tok, owner) })
	}
	if err := check(1, "a"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("check before any claim = %v, want ErrStale", err)
	}
	if err := inTx(t, db, func(tx *sql.Tx) error { return f.Claim(t.Context(), tx, shard, 7, "a") }); err != nil {
		t.Fatal(err)
	}
	if err := check(7, "a"); err != nil {
		t.Fatalf("holder's own check: %v", err)
	}
	if err := check(6, "a"); !errors.Is(err, fence.ErrStale) {
		t.Errorf("lower token = %v, want ErrStale", err)
	}
	if err := check(7, "b"); !errors.Is(err, fence.ErrStale) {
		t.Errorf("equal token of another owner = %v, want ErrStale", err)
	}
	if err := check(8, "a"); !errors.Is(err, fence.ErrStale) {
		t.Errorf("a token never claimed = %v, want ErrStale", err)
	}
}

// A takeover claim waits for the old holder's in-flight batch; once it has
// claimed, the old holder's next batch is refused.
func TestFence_ClaimWaitsForBatch(t *testing.T) {
	forEachTarget(t, 30*time.Second, testClaimWaitsForBatch)
}

func testClaimWaitsForBatch(t *testing.T, db *sql.DB, f *fence.Fence, _ dialect.Dialect) {
	ctx := t.Context()
	if err := inTx(t, db, func(tx *sql.Tx) error { return f.Claim(ctx, tx, shard, 1, "old") }); err != nil {
		t.Fatal(err)
	}
	batch, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ctx, batch, shard, 1, "old"); err != nil {
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	go func() {
		claimed <- inTx(t, db, func(tx *sql.Tx) error { return f.Claim(ctx, tx, shard, 2, "new") })
	}()
	select {
	case err := <-claimed:
		t.Fatalf("claim finished (%v) while the old batch held the watermark row", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; err != nil {
		t.Fatalf("claim after the batch committed: %v", err)
	}
	if err := inTx(t, db, func(tx *sql.Tx) error { return f.Check(ctx, tx, shard, 1, "old") }); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("old holder's next batch = %v, want ErrStale", err)
	}
}

// F3: a frozen holder's open transaction is aborted by the server itself
// (idle_in_transaction_session_timeout = TTL/3), so the successor's claim is
// not stalled until the frozen process wakes up.
func TestFence_FrozenHolderDoesNotStallClaim(t *testing.T) {
	forEachTarget(t, ttl, testFrozenHolder)
}

// ttl is the lease TTL of the frozen-holder test: the session idle timeout
// is TTL/3 (PostgreSQL) or a whole second (MySQL's wait_timeout).
const ttl = 1500 * time.Millisecond

func testFrozenHolder(t *testing.T, db *sql.DB, f *fence.Fence, _ dialect.Dialect) {
	ctx := t.Context()
	if err := inTx(t, db, func(tx *sql.Tx) error { return f.Claim(ctx, tx, shard, 1, "old") }); err != nil {
		t.Fatal(err)
	}
	frozen, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = frozen.Rollback() }()
	if err := f.Check(ctx, frozen, shard, 1, "old"); err != nil {
		t.Fatal(err)
	}
	// The holder now "freezes" with the row locked. A successor claims.
	start := time.Now()
	if err := inTx(t, db, func(tx *sql.Tx) error { return f.Claim(ctx, tx, shard, 2, "new") }); err != nil {
		t.Fatalf("claim: %v", err)
	}
	waited := time.Since(start)
	if limit := max(dialect.SessionFor(ttl).IdleInTransaction, time.Second) + time.Second; waited > limit {
		t.Errorf("claim waited %v for the frozen transaction, want at most about %v", waited, limit)
	}
	// The woken holder cannot commit anything.
	if err := frozen.Commit(); err == nil {
		t.Fatal("the frozen transaction committed after the server should have aborted it")
	}
	t.Logf("claim waited %v for a frozen holder (idle-in-transaction timeout %v)", waited, dialect.SessionFor(ttl).IdleInTransaction)
}

// A Session begins every transaction READ COMMITTED on one connection,
// which it keeps across commits and closes, out of the pool, when
// discarded or closed; the next Begin connects again.
func TestSession(t *testing.T) {
	forEachTarget(t, 30*time.Second, testSession)
}

func testSession(t *testing.T, db *sql.DB, _ *fence.Fence, d dialect.Dialect) {
	db.SetMaxIdleConns(10)
	l := newLease(t, 1, "a")
	// The lease has an hour left: the session's bound is half of it.
	level := `SELECT current_setting('transaction_isolation'), pg_backend_pid(), current_setting('lock_timeout')::interval BETWEEN '29 min' AND '30 min'`
	if d.Engine() == plans.MySQL {
		level = `SELECT REPLACE(LOWER(@@tx_isolation), '-', ' '), CONNECTION_ID(), @@SESSION.innodb_lock_wait_timeout BETWEEN 1790 AND 1800`
	}
	s := fence.NewSession(db, d)
	begin := func() (string, int64) {
		t.Helper()
		_, tx, tctx, end, err := s.Begin(l)
		if err != nil {
			t.Fatal(err)
		}
		defer end()
		var iso string
		var id int64
		var bounded bool
		if err := tx.QueryRowContext(tctx, level).Scan(&iso, &id, &bounded); err != nil {
			t.Fatal(err)
		}
		if !bounded {
			t.Error("the session is not bounded to half the lease's time left")
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return iso, id
	}
	iso, first := begin()
	if iso != "read committed" {
		t.Errorf("isolation %q, want read committed", iso)
	}
	if _, again := begin(); again != first {
		t.Errorf("second transaction on connection %d, want %d", again, first)
	}
	open := db.Stats().OpenConnections
	s.Discard()
	if n := db.Stats().OpenConnections; n != open-1 {
		t.Errorf("open connections %d after Discard, want %d", n, open-1)
	}
	if _, next := begin(); next == first {
		t.Errorf("after Discard, the same connection %d", next)
	}
	open = db.Stats().OpenConnections
	s.Close()
	if n := db.Stats().OpenConnections; n != open-1 {
		t.Errorf("open connections %d after Close, want %d", n, open-1)
	}
}
