package hold

import (
	"context"
	"database/sql"

	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/lock"
)

// Target is the Fence of a target database: its watermark rows
// (fence.Fence), in transactions bounded by the lease (fence.Begin).
type Target struct {
	DB    *sql.DB
	SQL   fence.Bounder
	Fence *fence.Fence
}

// Break ends the sessions that hold u's watermark row (fence.Break).
func (t Target) Break(ctx context.Context, u fence.Shard) (int64, error) {
	return t.Fence.Break(ctx, t.DB, u)
}

// Watermark reads u's watermark.
func (t Target) Watermark(ctx context.Context, u fence.Shard) (w Watermark, err error) {
	w.Token, w.Owner, err = t.Fence.Watermark(ctx, t.DB, u)
	return w, err
}

// Claim reads u's watermark, raises it strictly to the lease's token and
// runs fn (told the watermark it replaced), in one transaction bounded by the lease.
func (t Target) Claim(lease Lease, u fence.Shard, fn func(context.Context, *sql.Tx, Watermark) error) (last Watermark, err error) {
	err = t.tx(lease, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		if last.Token, last.Owner, err = t.Fence.Watermark(ctx, tx, u); err != nil {
			return err
		}
		if err := t.Fence.Claim(ctx, tx, u, fence.Token(lease.Token()), lease.Owner()); err != nil {
			return err
		}
		return fn(ctx, tx, last)
	})
	return last, err
}

// Do runs fn after the fence check of u, in one transaction bounded by
// the lease.
func (t Target) Do(lease Lease, u fence.Shard, fn func(context.Context, *sql.Tx) error) error {
	return t.tx(lease, func(ctx context.Context, tx *sql.Tx) error {
		if err := t.Fence.CheckLease(ctx, tx, u, lease); err != nil {
			return err
		}
		return fn(ctx, tx)
	})
}

// tx runs fn in a transaction bounded by the lease (fence.Begin):
// committed when fn succeeds, rolled back otherwise.
func (t Target) tx(lease Lease, fn func(context.Context, *sql.Tx) error) error {
	tx, ctx, done, err := fence.Begin(t.DB, t.SQL, lease)
	if err != nil {
		return err
	}
	defer done()
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Locker is the Leases of a lock service.
type Locker struct{ *lock.Locker }

// Acquire is lock.Locker.Acquire, its lease as a Lease.
func (l Locker) Acquire(ctx context.Context, base, owner string) (Lease, error) {
	le, err := l.Locker.Acquire(ctx, base, owner)
	if le == nil {
		return nil, err
	}
	return le, err
}
