package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/lock"
)

// errReclaim means the fence watermark is at or above the token the lock
// service gave us (it lost its state): raise its tokens and acquire again
// (L4).
type errReclaim struct{ watermark fence.Token }

func (e errReclaim) Error() string {
	return fmt.Sprintf("token not above the watermark %d", e.watermark)
}

// watermark is a fence row as it was before a claim.
type watermark struct {
	token fence.Token
	owner string
}

// claim is a shard this instance holds: its lease, claimed in the target's
// fence, and the checkpoint read in the claim's transaction.
type claim struct {
	lease    *lock.Lease
	cp       cursor.Checkpoint
	last     watermark     // the fence row the claim replaced
	acquired time.Time     // when the lease was granted
	took     time.Duration // the claim's transaction
}

// maxReclaims bounds how often one claim raises the lock service's tokens
// above the watermark and acquires again.
const maxReclaims = 3

// claimShard acquires the shard's lease and claims its fence (takeover,
// C2). A token not above the watermark (the lock service lost its state, L4, or the
// table holds rows of an earlier plan) gives the lease back, raises the
// counter and acquires again, up to maxReclaims times. A lease held by
// another instance is a *lock.HeldError. When the claim itself fails, the
// claim is returned with its lease, still held, beside the error: the
// caller releases it, as it does a claim that succeeded.
func (r *Runner) claimShard(ctx context.Context, s fence.Shard, log *slog.Logger) (*claim, error) {
	return r.claimWith(ctx, s, log, r.takeover)
}

// claimWith is claimShard with the claim's transaction take (takeover for
// a table's shard, claimPhase for the post-load phase).
func (r *Runner) claimWith(ctx context.Context, s fence.Shard, log *slog.Logger, take func(*lock.Lease, fence.Shard) (cursor.Checkpoint, watermark, error)) (*claim, error) {
	base := leaseBase(s)
	for attempt := 1; ; attempt++ {
		lease, err := r.locker.Acquire(ctx, base, r.opts.Owner)
		if err != nil {
			return nil, err
		}
		c := &claim{lease: lease, acquired: time.Now()}
		c.cp, c.last, err = take(lease, s)
		c.took = time.Since(c.acquired)
		var rc errReclaim
		if !errors.As(err, &rc) || attempt >= maxReclaims || lease.Context().Err() != nil {
			return c, err
		}
		r.release(ctx, lease)
		log.Warn("the token is not above the target's watermark (the lock service lost its state, L4, or the table holds rows of an earlier plan); raising its tokens", "watermark", int64(rc.watermark))
		if err := r.locker.RaiseToken(ctx, base, int64(rc.watermark)); err != nil {
			return nil, err
		}
	}
}

// releaseTimeout bounds giving a lease back.
const releaseTimeout = 5 * time.Second

// release gives the lease back (compare-and-delete), even when ctx was
// cancelled by a signal.
func (r *Runner) release(ctx context.Context, lease *lock.Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := lease.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotOwner) {
		r.log.Warn("lease release failed; it will expire by its TTL", "lease", lease.Key(), "err", err)
	}
}

// takeover is C2: one transaction raises the watermark strictly to the
// lease's token (which waits out any in-flight transaction of the old
// holder) and reads the checkpoint. It also returns the watermark it
// replaced. Before it, the sessions of earlier holders that still hold
// the watermark row are ended (fence.Break): one frozen in the middle of
// sending a batch's rows would hold it for as long as it stays frozen.
func (r *Runner) takeover(lease *lock.Lease, s fence.Shard) (cp cursor.Checkpoint, last watermark, err error) {
	r.breakFence(lease, s)
	err = r.leaseTx(lease, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		if last, err = r.raiseFence(ctx, tx, lease, s); err != nil {
			return err
		}
		cp, err = r.cursor.ReadForUpdate(ctx, tx, s)
		return err
	})
	return cp, last, err
}

// breakFence ends the sessions that hold s's watermark row for the claim
// of lease. A failure is only logged: the claim then waits for them, as
// it would anyway.
func (r *Runner) breakFence(lease *lock.Lease, s fence.Shard) {
	ctx, cancel := context.WithTimeout(lease.Context(), releaseTimeout)
	defer cancel()
	switch n, err := r.fence.Break(ctx, r.dst, s); {
	case err != nil:
		r.log.Warn("could not end the sessions of earlier holders that hold the shard's watermark row; the claim waits for them", "shard", s.String(), "err", err)
	case n > 0:
		r.log.Warn("ended the target sessions of an earlier holder that still held the shard's watermark row (frozen while it sent a batch)", "shard", s.String(), "sessions", n)
	}
}

// raiseFence raises the shard's watermark strictly to the lease's token in
// tx and returns the one it replaced; a token not above it is errReclaim.
func (r *Runner) raiseFence(ctx context.Context, tx *sql.Tx, lease *lock.Lease, s fence.Shard) (last watermark, err error) {
	if last.token, last.owner, err = r.fence.Watermark(ctx, tx, s); err != nil {
		return last, err
	}
	if err := r.fence.Claim(ctx, tx, s, fence.Token(lease.Token()), lease.Owner()); err != nil {
		var st *fence.StaleError
		if errors.As(err, &st) {
			return last, errReclaim{st.Watermark}
		}
		return last, err
	}
	return last, nil
}

// setState records the shard's state, fenced like a batch.
func (r *Runner) setState(lease *lock.Lease, s fence.Shard, st cursor.State) error {
	return r.leaseTx(lease, func(ctx context.Context, tx *sql.Tx) error {
		if err := r.fence.CheckLease(ctx, tx, s, lease); err != nil {
			return err
		}
		return r.cursor.SetState(ctx, tx, s, st, fence.Token(lease.Token()))
	})
}

// halt records the shard halted so no instance resumes it automatically,
// and reports whether it could.
func (r *Runner) halt(lease *lock.Lease, s fence.Shard, log *slog.Logger) bool {
	if err := r.setState(lease, s, cursor.Halted); err != nil {
		log.Error("could not record the shard halted", "err", err)
		return false
	}
	log.Error("shard halted: automatic recovery gave up; fix the cause, then run `migrate resume`")
	r.opts.Metrics.Halted(s.Table, s.Index)
	return true
}

// leaseTx runs fn in a transaction bounded by the lease (fence.Begin):
// committed when fn succeeds, rolled back otherwise.
func (r *Runner) leaseTx(lease *lock.Lease, fn func(context.Context, *sql.Tx) error) error {
	tx, ctx, done, err := fence.Begin(r.dst, r.dstD, lease)
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

// fenced classifies an error that stopped a holder: a refused token or a
// lost lease becomes ErrFenced (counted as a stale rejection when the
// target refused it); a cancelled run or anything else is returned as is.
func (r *Runner) fenced(ctx context.Context, lease *lock.Lease, s fence.Shard, err error) error {
	var rc errReclaim
	switch {
	case errors.As(err, &rc):
		return err
	case errors.Is(err, fence.ErrStale):
		r.mu.Lock()
		r.report.StaleRejections++
		r.mu.Unlock()
		r.opts.Metrics.StaleRejected(s.Table, s.Index)
		return fmt.Errorf("%w: %w", ErrFenced, err)
	case ctx.Err() != nil:
		return err
	case errors.Is(err, batch.ErrLeaseLost) || errors.Is(context.Cause(lease.Context()), lock.ErrLost):
		r.opts.Metrics.SelfFenced(s.Table, s.Index)
		return fmt.Errorf("%w: %w", ErrFenced, errLeaseLost{err, lease.Token()})
	}
	return err
}

// errLeaseLost: the holder stopped writing because its lease ended (it
// could not renew in time, or the lock service no longer had it), not because a
// successor's token was refused to it.
type errLeaseLost struct {
	err   error
	token int64 // the lease's
}

func (e errLeaseLost) Error() string { return e.err.Error() }
func (e errLeaseLost) Unwrap() error { return e.err }

// superseded reports whether another holder has claimed the shard in the
// target since token: the watermark is above it. When it is not, the lease
// was lost to the lock service (a restart, an outage) rather than to a successor, and
// the shard may be taken again.
func (r *Runner) superseded(ctx context.Context, s fence.Shard, token int64) (bool, error) {
	w, _, err := r.fence.Watermark(ctx, r.dst, s)
	return int64(w) > token, err
}
