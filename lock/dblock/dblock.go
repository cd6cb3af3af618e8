// Package dblock keeps leases in a database table — the target database by
// default (`lock: db`, and a plan that names no lock service), or another
// PostgreSQL or MySQL database — so that a run needs no lock service of its
// own. A lease is one row per name, taken and renewed by conditional
// UPDATEs whose every time is the database's clock, never a client's:
//
//	acquire  lease_until <= now()                    -> owner, token+1, lease_until = now()+TTL
//	renew    owner = $me AND token = $t AND lease_until > now() -> lease_until = now()+TTL
//	release  the same condition                      -> lease_until in the past, released
//
// The token is incremented in the statement that grants the lease, so it is
// above every token granted before for that name; the row keeps the holder
// before the current one, so a takeover knows whom it replaced and, by the
// database's clock, how long the lease stood unrenewed. Standbys poll the
// remaining time (lease_until - now()), at most every poll.
//
// The lease row is not the fence's watermark row, and its grant is not the
// takeover's transaction: see docs/locks.md for why they stay two.
package dblock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/lock"
)

// Backend is a lock.Backend on a table of one database.
type Backend struct {
	db   *sql.DB
	sql  dialect.Lease
	name string
	log  *slog.Logger
}

// New is a Backend on db, whose statements are d's; name describes it in
// messages (a redacted URL). The Backend owns db: Close closes it. The
// lease table is created on the first grant or raise, not before: a dry
// run or a status creates nothing.
func New(db *sql.DB, d dialect.Lease, name string, log *slog.Logger) *Backend {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Backend{db: db, sql: d, name: name, log: log}
}

// String implements lock.Backend.
func (b *Backend) String() string { return b.name }

// Ping implements lock.Backend.
func (b *Backend) Ping(ctx context.Context) error { return b.db.PingContext(ctx) }

// Close implements lock.Backend.
func (b *Backend) Close() error { return b.db.Close() }

// MaxWait implements lock.Backend: lease_until passes TTL after the last
// renewal, by the database's clock, and a standby asks at most every poll.
func (b *Backend) MaxWait(ttl, poll time.Duration) time.Duration { return ttl + poll }

// ensure creates the row of name, and the lease table first if it is
// missing. PostgreSQL fails all but one of several CREATE TABLE IF NOT
// EXISTS run at once (a unique violation in its catalog, raised once the
// winner committed): instances started together on a fresh target try
// again once, and then see the table.
func (b *Backend) ensure(ctx context.Context, name string) error {
	_, err := b.db.ExecContext(ctx, b.sql.LeaseInit(), name)
	if err != nil && dialect.MissingTable(err) {
		if _, err = b.db.ExecContext(ctx, b.sql.LeaseTable()); err != nil {
			_, err = b.db.ExecContext(ctx, b.sql.LeaseTable())
		}
		if err != nil {
			return fmt.Errorf("lock: create %s: %w", dialect.LeaseTable, err)
		}
		_, err = b.db.ExecContext(ctx, b.sql.LeaseInit(), name)
	}
	if err != nil {
		return fmt.Errorf("lock: lease %s: %w", name, err)
	}
	return nil
}

// row is a lease row as LeaseRead yields it.
type row struct {
	owner                  string
	token                  int64
	leftMs                 int64 // remaining; negative when free
	renewedMs, acquiredMs  int64
	released               bool
	prevOwner              string
	prevToken, prevRenewed int64
	prevReleased           bool
}

func (r row) held() bool { return r.leftMs > 0 && r.owner != "" }

// read reads the row of name; ok is false when there is none.
func (b *Backend) read(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string, locking bool) (r row, ok bool, err error) {
	err = q.QueryRowContext(ctx, b.sql.LeaseRead(locking), name).Scan(&r.owner, &r.token, &r.leftMs, &r.renewedMs,
		&r.acquiredMs, &r.released, &r.prevOwner, &r.prevToken, &r.prevRenewed, &r.prevReleased)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, false, nil
	}
	return r, err == nil, err
}

// Acquire implements lock.Backend: one transaction takes the lease if
// lease_until passed, with token + 1, and reads the grant back.
func (b *Backend) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lock.Grant, error) {
	if err := b.ensure(ctx, name); err != nil {
		return lock.Grant{}, err
	}
	tx, err := b.db.BeginTx(ctx, nil) // READ COMMITTED: dialect.Session.Lease
	if err != nil {
		return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", name, err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, b.sql.LeaseAcquire(), owner, ttl.Milliseconds(), name)
	if err != nil {
		return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", name, err)
	}
	r, _, err := b.read(ctx, tx, name, true)
	if err != nil {
		return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", name, err)
	}
	if n != 1 && !(r.held() && r.owner == owner) {
		return lock.Grant{Status: lock.Held, Owner: r.owner, Token: r.token, TTL: time.Duration(max(r.leftMs, 0)) * time.Millisecond}, nil
	}
	g := lock.Grant{Status: lock.Granted, Owner: owner, Token: r.token, At: ms(r.acquiredMs),
		Prev: lock.Holder{Owner: r.prevOwner, Token: r.prevToken, RenewedAt: ms(r.prevRenewed), Released: r.prevReleased}}
	if g.Prev.Owner != "" && !g.Prev.RenewedAt.IsZero() {
		g.Wait = g.At.Sub(g.Prev.RenewedAt)
	}
	if n != 1 {
		// A retried acquire (its first reply was lost): the stored
		// grant, renewed as Redis's retry renews it, with no new token.
		if ok, err := b.Renew(ctx, name, owner, r.token, ttl); err != nil || !ok {
			return lock.Grant{}, errors.Join(fmt.Errorf("lock: acquire %s again", name), err)
		}
		g.Status = lock.Retried
	}
	return g, nil
}

// Renew implements lock.Backend.
func (b *Backend) Renew(ctx context.Context, name, owner string, token int64, ttl time.Duration) (bool, error) {
	return b.exec(ctx, "renew", name, b.sql.LeaseRenew(), ttl.Milliseconds(), name, owner, token)
}

// Release implements lock.Backend.
func (b *Backend) Release(ctx context.Context, name, owner string, token int64) (bool, error) {
	return b.exec(ctx, "release", name, b.sql.LeaseRelease(), name, owner, token)
}

// exec runs a conditional update: true when it changed the row.
func (b *Backend) exec(ctx context.Context, what, name, q string, args ...any) (bool, error) {
	res, err := b.db.ExecContext(ctx, q, args...)
	if err != nil {
		if dialect.MissingTable(err) {
			return false, nil // no lease table: no lease, ours or another's
		}
		return false, fmt.Errorf("lock: %s %s: %w", what, name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("lock: %s %s: %w", what, name, err)
	}
	return n == 1, nil
}

// Inspect implements lock.Backend.
func (b *Backend) Inspect(ctx context.Context, name string) (lock.Info, error) {
	r, ok, err := b.read(ctx, b.db, name, false)
	switch {
	case err != nil && dialect.MissingTable(err):
		return lock.Info{}, nil
	case err != nil:
		return lock.Info{}, fmt.Errorf("lock: inspect %s: %w", name, err)
	case !ok:
		return lock.Info{}, nil
	}
	info := lock.Info{}
	if r.owner != "" {
		info.Last = lock.Holder{Owner: r.owner, Token: r.token, RenewedAt: ms(r.renewedMs), Released: r.released}
	}
	if r.held() {
		info.Held, info.Owner, info.Token = true, r.owner, r.token
		info.TTL, info.RenewedAt = time.Duration(r.leftMs)*time.Millisecond, ms(r.renewedMs)
	}
	return info, nil
}

// Raise implements lock.Backend: token = max(token, atLeast); the next
// grant's is one more.
func (b *Backend) Raise(ctx context.Context, name string, atLeast int64) error {
	if err := b.ensure(ctx, name); err != nil {
		return err
	}
	if _, err := b.db.ExecContext(ctx, b.sql.LeaseRaise(), atLeast, name); err != nil {
		return fmt.Errorf("lock: raise token of %s to %d: %w", name, atLeast, err)
	}
	return nil
}

// WaitFree implements lock.Backend: it polls the lease's remaining time
// by the database's clock (L5).
func (b *Backend) WaitFree(ctx context.Context, name, _ string, poll time.Duration) error {
	return lock.PollFree(ctx, name, poll, b.log, func(ctx context.Context) (time.Duration, bool, error) {
		r, ok, err := b.read(ctx, b.db, name, false)
		if err != nil && dialect.MissingTable(err) {
			return 0, false, nil
		}
		return time.Duration(max(r.leftMs, 0)) * time.Millisecond, ok && r.held(), err
	})
}

// Forget implements lock.Backend.
func (b *Backend) Forget(ctx context.Context, name string) error {
	if _, err := b.db.ExecContext(ctx, b.sql.LeaseForget(), name); err != nil {
		if dialect.MissingTable(err) {
			return nil
		}
		return fmt.Errorf("lock: forget %s: %w", name, err)
	}
	r, ok, err := b.read(ctx, b.db, name, false)
	switch {
	case err != nil:
		return fmt.Errorf("lock: forget %s: %w", name, err)
	case ok && r.held():
		return fmt.Errorf("lock: forget %s: %w", name, lock.ErrHeld)
	}
	return nil
}

// ms is Unix milliseconds as a time; 0 (never recorded) is the zero time.
func ms(v int64) time.Time {
	if v <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

var _ lock.Backend = (*Backend)(nil)
