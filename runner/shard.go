package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/lock"
)

// A shard's life in this instance (runShard) is a small state machine:
//
//	acquire ──held by another──▶ standby ──lease free──▶ acquire
//	acquire ──claimed──▶ takeover/hold ──▶ copy ──▶ finish (done)
//	any step ──failed before writing──▶ backoff ──▶ acquire (retry.Budget)
//	any step ──halted or fenced──▶ stop
//
// decide maps what an attempt returned to the next state; it is pure and
// unit-tested.

// next is what a shard does after an attempt.
type next int

const (
	nextDone    next = iota // the shard is done (by this instance or another)
	nextStop                // return the error: halted, fenced, cancelled
	nextStandby             // another instance holds the lease: wait for it
	nextBackoff             // failed before writing: try again after a backoff
)

func (n next) String() string {
	return [...]string{"done", "stop", "standby", "backoff"}[n]
}

// errRetry wraps a failure before any row was written (acquire, takeover):
// the lease is given back and the shard tried again after a backoff.
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

// unavailable reports whether err says that a database or the lock
// service did not answer: an outage, waited out up to max_outage.
func unavailable(err error) bool {
	return dialect.Classify(err) == dialect.Unavailable || errors.Is(err, lock.ErrUnavailable)
}

// decide is the next state after an attempt that returned err, and for a
// backoff the kind of failure: an outage (a database or the lock service
// unavailable, or a claim waiting for the previous holder's transaction to
// end, which its server-side bounds end) is waited out up to max_outage;
// anything else counts against max_retries.
func decide(ctx context.Context, err error) (next, retry.Kind) {
	var held *lock.HeldError
	var again errRetry
	var rc errReclaim
	switch {
	case err == nil:
		return nextDone, retry.Final
	case ctx.Err() != nil:
		return nextStop, retry.Final
	case errors.As(err, &held):
		return nextStandby, retry.Final
	case errors.As(err, &again), errors.As(err, &rc), !errors.Is(err, ErrHalted) && !errors.Is(err, ErrFenced):
		if unavailable(err) || dialect.LockTimeout(err) {
			return nextBackoff, retry.Outage
		}
		return nextBackoff, retry.Failure
	}
	return nextStop, retry.Final
}

// shardRun is one shard's state machine in this instance.
type shardRun struct {
	r      *Runner
	j      shardJob
	log    *slog.Logger
	budget retry.Budget // failures before writing, and outages
	lost   error        // the lease lost to the lock service that the loop is taking again
}

// runShard drives one shard until it is done, by this instance or another:
// acquire the lease or wait as a standby, take over, copy, finish.
func (r *Runner) runShard(ctx context.Context, j shardJob) error {
	sr := &shardRun{r: r, j: j, log: r.log.With("shard", j.spec.Shard.String()),
		budget: retry.Budget{MaxFailures: r.plan.MaxRetries, MaxOutage: r.maxOutage()}}
	return sr.run(ctx)
}

func (sr *shardRun) run(ctx context.Context) error {
	r, s := sr.r, sr.j.spec.Shard
	electStart := time.Now()
	for {
		err := sr.attempt(ctx, electStart)
		var ll errLeaseLost
		if errors.As(err, &ll) {
			// A lease lost to the lock service, with no successor in the target, is
			// taken again (with a token above the watermark); one lost to a
			// successor ends here (exit 4).
			switch sup, werr := r.superseded(ctx, s, ll.token); {
			case werr == nil && !sup:
				sr.log.Warn("lease lost with no successor in the target (the lock service restarted or was unreachable); taking the shard again", "err", err)
				sr.lost, err = err, errRetry{err}
			case werr != nil && unavailable(werr):
				// The target is away (and with it the lease, when it
				// keeps it): one outage, waited out up to max_outage
				// like any other; the claim after it finds out whether
				// a successor came meanwhile.
				sr.log.Warn("lease lost while the target is unreachable; taking the shard again once it is back", "err", err)
				sr.lost, err = err, errRetry{fmt.Errorf("%w (target: %w)", err, werr)}
			}
		}
		state, kind := decide(ctx, err)
		switch state {
		case nextDone:
			return nil
		case nextStop:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		case nextStandby:
			if err := sr.standby(ctx, err); err != nil {
				return err
			}
		case nextBackoff:
			if err := sr.backoff(ctx, err, kind); err != nil {
				return err
			}
		}
		electStart = time.Now()
	}
}

// standby waits while another instance holds the lease: for a free slot
// first (watching a lease is of use only with a slot to take it in, and
// while every slot is busy, no polling loads the lock service), then for the lease.
func (sr *shardRun) standby(ctx context.Context, err error) error {
	r, s := sr.r, sr.j.spec.Shard
	var held *lock.HeldError
	errors.As(err, &held)
	r.opts.Metrics.SetState(s.Table, s.Index, "standby")
	sr.log.Info("standby: lease held by another instance", "owner", held.Owner, "token", held.Token, "ttl", held.TTL)
	if err := r.waitSlotFree(ctx); err != nil {
		return err
	}
	return r.locker.WaitFree(ctx, leaseBase(s), r.opts.Owner)
}

// backoff counts a failure before writing against the budget and waits
// before the next attempt; a spent budget ends the shard.
func (sr *shardRun) backoff(ctx context.Context, err error, kind retry.Kind) error {
	s := sr.j.spec.Shard
	attempt, wait, ex := sr.budget.Fail(err, kind)
	switch {
	case ex != nil && ex.Outage > 0:
		return errors.Join(sr.lost, fmt.Errorf("%s: unavailable for %v (max_outage %v): %w", s, ex.Outage.Round(time.Second), sr.r.maxOutage(), err))
	case ex != nil:
		return errors.Join(sr.lost, fmt.Errorf("%s: gave up after %d attempts: %w", s, ex.Failures, err))
	}
	sr.log.Warn("could not take the shard, retrying", "err", err, "attempt", attempt, "backoff", wait)
	return retry.Sleep(ctx, wait)
}

// attempt is one pass: read the checkpoint (a shard done or halted needs
// nothing more), then, in one of the instance's slots, claim the shard and
// work it.
func (sr *shardRun) attempt(ctx context.Context, electStart time.Time) error {
	r, j := sr.r, sr.j
	cp, err := r.cursor.Read(ctx, r.dst, j.spec.Shard)
	if err != nil {
		return err
	}
	if stop, err := r.finished(j, cp); stop {
		return err
	}
	return r.withSlot(ctx, func() error {
		c, err := r.claimShard(ctx, j.spec.Shard, sr.log)
		if c != nil {
			defer r.release(ctx, c.lease)
		}
		if err != nil {
			return sr.claimFailed(ctx, c, err)
		}
		h := &holding{r: r, j: j, c: c, log: r.log.With("shard", j.spec.Shard.String(), "token", c.lease.Token())}
		return h.run(ctx, electStart)
	})
}

// claimFailed classifies a failed claim: the lease held by another
// instance (a standby's wait), a token still not above the watermark or a
// lease lost while claiming (fenced), or a failure before any row was
// written (tried again).
func (sr *shardRun) claimFailed(ctx context.Context, c *claim, err error) error {
	r, s := sr.r, sr.j.spec.Shard
	var held *lock.HeldError
	var rc errReclaim
	switch {
	case errors.As(err, &held):
		return err
	case c == nil:
		return errRetry{err}
	case errors.As(err, &rc) || c.lease.Context().Err() != nil:
		return r.fenced(ctx, c.lease, s, err)
	}
	if p := c.lease.Previous(); p.Owner != "" && !p.Released {
		r.opts.Metrics.RecoveryFailed(s.Table, s.Index) // the lease was reclaimed; the business recovery failed
	}
	return errRetry{fmt.Errorf("takeover of %s: %w", s, err)}
}

// withSlot runs fn holding one of the instance's shard slots (--parallel),
// waiting for one to free.
func (r *Runner) withSlot(ctx context.Context, fn func() error) error {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.slots }()
	return fn()
}

// maxOutage is how long a database may stay unreachable before a shard
// gives up (the plan's max_outage; batch.Spec.MaxOutage).
func (r *Runner) maxOutage() time.Duration { return r.plan.MaxOutage }

// waitSlotFree returns once one of the instance's shard slots is free,
// without taking it.
func (r *Runner) waitSlotFree(ctx context.Context) error {
	select {
	case r.slots <- struct{}{}:
		<-r.slots
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finished reports whether the shard needs no more work, recording it.
func (r *Runner) finished(j shardJob, cp cursor.Checkpoint) (bool, error) {
	if cp.State == cursor.Done || cp.State == cursor.Halted {
		r.opts.Metrics.SetState(cp.Shard.Table, cp.Shard.Index, string(cp.State))
	}
	switch cp.State {
	case cursor.Done:
		r.addShard(ShardResult{Table: j.table.Name, Target: j.table.Target, Shard: cp.Shard.Index, State: string(cp.State), Token: int64(cp.Token), ByOther: true})
		r.describe()
		return true, nil
	case cursor.Halted:
		return true, fmt.Errorf("%w: %s is halted; see `migrate status`, then `migrate resume`", ErrHalted, cp.Shard)
	}
	return false, nil
}
