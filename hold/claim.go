package hold

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/lock"
)

// errReclaim means the fence watermark is at or above the token the lock
// service gave us (it lost its state, L4, or the table holds rows of an
// earlier plan): raise its tokens and acquire again.
type errReclaim struct{ watermark fence.Token }

func (e errReclaim) Error() string {
	return fmt.Sprintf("token not above the watermark %d", e.watermark)
}

// maxReclaims bounds how often one claim raises the lock service's tokens
// above the watermark and acquires again.
const maxReclaims = 3

// releaseTimeout bounds giving a lease back, and ending an earlier
// holder's sessions.
const releaseTimeout = 5 * time.Second

// Hold acquires u's lease and claims its fence (takeover, C2): the
// sessions of earlier holders that still hold the watermark row are ended
// (Fence.Break: one frozen in the middle of sending a batch's rows would
// hold it for as long as it stays frozen), then one transaction raises the
// watermark strictly to the lease's token (which waits out any in-flight
// transaction of the old holder) and runs w.Resume. A token not above the
// watermark gives the lease back, raises the service's tokens and acquires
// again, up to maxReclaims times. A lease held by another instance is a
// *lock.HeldError. When the claim itself fails, the claim is returned with
// its lease, still held, beside the error: the caller releases it
// (Release), as it does a claim that succeeded.
func (l *Loop) Hold(ctx context.Context, u fence.Shard, w Work) (*Claim, error) {
	return l.hold(ctx, u, w, time.Now())
}

// hold is Hold for a unit first looked at electStart (Claim.Elect).
func (l *Loop) hold(ctx context.Context, u fence.Shard, w Work, electStart time.Time) (*Claim, error) {
	log := l.log().With("shard", u.String())
	base := Base(u)
	for attempt := 1; ; attempt++ {
		lease, err := l.Leases.Acquire(ctx, base, l.Owner)
		if err != nil {
			return nil, err
		}
		c := &Claim{Unit: u, Lease: lease, Acquired: time.Now()}
		c.Elect = c.Acquired.Sub(electStart)
		err = l.take(c, w, log)
		c.Took = time.Since(c.Acquired)
		var rc errReclaim
		if !errors.As(err, &rc) || attempt >= maxReclaims || lease.Context().Err() != nil {
			return c, err
		}
		l.Release(ctx, lease)
		log.Warn("the token is not above the target's watermark (the lock service lost its state, L4, or the table holds rows of an earlier plan); raising its tokens", "watermark", int64(rc.watermark))
		if err := l.Leases.RaiseToken(ctx, base, int64(rc.watermark)); err != nil {
			return nil, err
		}
	}
}

// take is the claim's transaction, inside w's guard if it has one.
func (l *Loop) take(c *Claim, w Work, log *slog.Logger) error {
	l.breakFence(c, log)
	claim := func() error {
		var err error
		c.Last, err = l.Fence.Claim(c.Lease, c.Unit, func(ctx context.Context, tx *sql.Tx, last Watermark) error {
			var err error
			if c.Found, err = w.Resume(ctx, tx, c.Lease); err != nil {
				return err
			}
			c.Previous, c.Wait = previousHolder(c.Lease, c.Found, last)
			if a, ok := w.(Announced); ok && c.TakenOver() && c.Found.State != cursor.Done && c.Found.State != cursor.Halted {
				c.Took = time.Since(c.Acquired) // so far: the claim's commit is left
				return a.TakenOver(ctx, tx, c)
			}
			return nil
		})
		if st := (*fence.StaleError)(nil); errors.As(err, &st) {
			return errReclaim{st.Watermark}
		}
		return err
	}
	if g, ok := w.(Guarded); ok {
		return g.Guard(c.Lease, claim)
	}
	return claim()
}

// breakFence ends the sessions that hold the unit's watermark row for
// c's claim. A failure is only logged: the claim then waits for them, as
// it would anyway.
func (l *Loop) breakFence(c *Claim, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(c.Lease.Context(), releaseTimeout)
	defer cancel()
	switch n, err := l.Fence.Break(ctx, c.Unit); {
	case err != nil:
		log.Warn("could not end the sessions of earlier holders that hold the shard's watermark row; the claim waits for them", "err", err)
	case n > 0:
		log.Warn("ended the target sessions of an earlier holder that still held the shard's watermark row (frozen while it sent a batch)", "sessions", n)
	}
}

// Release gives the lease back (compare-and-delete), even when ctx was
// cancelled by a signal.
func (l *Loop) Release(ctx context.Context, lease Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := lease.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotOwner) {
		l.log().Warn("lease release failed; it will expire by its TTL", "lease", lease.Key(), "err", err)
	}
}

// previousHolder is the holder a claim takes over from: the lease's
// record in the lock service, or, when the service lost it (L4; our own
// refused first attempt may have written one since) but the fence row
// still names another holder of a running unit, that holder, waited for
// since its last commit. Owner "" when the claim replaced no live holder.
func previousHolder(lease Lease, found Found, last Watermark) (lock.Holder, time.Duration) {
	prev, wait, owner := lease.Previous(), lease.Wait(), lease.Owner()
	if (prev.Owner == "" || prev.Owner == owner) && last.Owner != "" && last.Owner != owner && found.State == cursor.Running {
		return lock.Holder{Owner: last.Owner, Token: int64(last.Token)}, max(time.Since(found.UpdatedAt), 0)
	}
	if prev.Released {
		return lock.Holder{}, wait
	}
	return prev, wait
}
