package hold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/lock"
)

// A unit's life in this instance (Loop.Run) is a small state machine:
//
//	look ──done or halted──▶ stop
//	look ──▶ acquire ──held by another──▶ standby ──lease free──▶ look
//	acquire ──claimed──▶ Work.Run ──▶ done | halted | fenced
//	any step ──failed before writing──▶ backoff ──▶ look (retry.Budget)
//
// decide maps what an attempt returned to the next state; it is pure and
// unit-tested.

// Loop runs units of work for one owner.
type Loop struct {
	Leases     Leases
	Fence      Fence
	Owner      string
	Log        *slog.Logger
	MaxRetries int           // failures before writing, in a row, before a unit gives up
	MaxOutage  time.Duration // how long a database or the lock service may stay away
	// Slots, when not nil, caps the units held at once: a claim and its
	// work take one.
	Slots chan struct{}
	// Observe, when not nil, is told every Event; it must not block.
	Observe func(Event)
}

func (l *Loop) emit(e Event) {
	if l.Observe != nil {
		l.Observe(e)
	}
}

func (l *Loop) log() *slog.Logger {
	if l.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Log
}

// next is what a unit does after an attempt.
type next int

const (
	nextDone    next = iota // the unit is done (by this instance or another)
	nextStop                // return the error: halted, fenced, cancelled
	nextStandby             // another instance holds the lease: wait for it
	nextBackoff             // failed before writing: try again after a backoff
)

func (n next) String() string {
	return [...]string{"done", "stop", "standby", "backoff"}[n]
}

// errRetry wraps a failure before any row was written, or a Work's Again:
// the lease is given back and the unit tried again after a backoff.
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

// Again makes a Work's error give the lease back and take the unit again
// (the target lost batches it had committed).
func Again(err error) error { return errRetry{err} }

// errFoundDone: the unit was found done, by another instance or an
// earlier run.
var errFoundDone = errors.New("found done")

// unavailable reports whether err says that a database or the lock service
// did not answer: an outage, waited out up to max_outage.
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
	var rc errReclaim
	_, again := err.(errRetry) // at the top only: a fenced error may wrap an Again whose lease ended since
	switch {
	case err == nil:
		return nextDone, retry.Final
	case ctx.Err() != nil:
		return nextStop, retry.Final
	case errors.As(err, &held):
		return nextStandby, retry.Final
	case again, errors.As(err, &rc), !errors.Is(err, ErrHalted) && !errors.Is(err, ErrFenced):
		if unavailable(err) || dialect.LockTimeout(err) {
			return nextBackoff, retry.Outage
		}
		return nextBackoff, retry.Failure
	}
	return nextStop, retry.Final
}

// Run drives unit u until it is done, by this instance or another:
// acquire its lease or wait as a standby, claim it, run w.
func (l *Loop) Run(ctx context.Context, u fence.Shard, w Work) error {
	log := l.log().With("shard", u.String())
	budget := retry.Budget{MaxFailures: l.MaxRetries, MaxOutage: l.MaxOutage}
	var lost error // the lease lost to the lock service, that the loop is taking again
	electStart := time.Now()
	for {
		err := l.attempt(ctx, u, w, log, electStart)
		if errors.Is(err, errFoundDone) {
			if lost != nil {
				// Another instance finished the unit after this one lost
				// its lease: it was superseded, whatever the target said
				// when asked before.
				return lost
			}
			err = nil
		}
		var ll errLeaseLost
		if errors.As(err, &ll) {
			// A lease lost to the lock service, with no successor in the
			// target, is taken again (with a token above the
			// watermark); one lost to a successor ends here (exit 4).
			switch w, werr := l.Fence.Watermark(ctx, u); {
			case werr == nil && int64(w.Token) <= ll.token:
				log.Warn("lease lost with no successor in the target (the lock service restarted or was unreachable); taking the shard again", "err", err)
				lost, err = err, errRetry{err}
			case werr != nil && unavailable(werr):
				// The target is away (and with it the lease, when it
				// keeps it): one outage, waited out up to max_outage
				// like any other; the claim after it finds out whether
				// a successor came meanwhile.
				log.Warn("lease lost while the target is unreachable; taking the shard again once it is back", "err", err)
				lost, err = err, errRetry{fmt.Errorf("%w (target: %w)", err, werr)}
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
			if err := l.standby(ctx, u, err, log); err != nil {
				return err
			}
		case nextBackoff:
			attempt, wait, ex := budget.Fail(err, kind)
			switch {
			case ex != nil && ex.Outage > 0:
				return errors.Join(lost, fmt.Errorf("%s: unavailable for %v (max_outage %v): %w", u, ex.Outage.Round(time.Second), l.MaxOutage, err))
			case ex != nil:
				return errors.Join(lost, fmt.Errorf("%s: gave up after %d attempts: %w", u, ex.Failures, err))
			}
			log.Warn("could not take the shard, retrying", "err", err, "attempt", attempt, "backoff", wait)
			if err := retry.Sleep(ctx, wait); err != nil {
				return err
			}
		}
		electStart = time.Now()
	}
}

// standby waits while another instance holds the lease: for a free slot
// first (watching a lease is of use only with a slot to take it in, and
// while every slot is busy, no polling loads the lock service), then for
// the lease.
func (l *Loop) standby(ctx context.Context, u fence.Shard, err error, log *slog.Logger) error {
	var held *lock.HeldError
	errors.As(err, &held)
	l.emit(Event{Kind: Standby, Unit: u, Owner: held.Owner, Token: held.Token})
	log.Info("standby: lease held by another instance", "owner", held.Owner, "token", held.Token, "ttl", held.TTL)
	if err := l.waitSlotFree(ctx); err != nil {
		return err
	}
	return l.Leases.WaitFree(ctx, Base(u), l.Owner)
}

// attempt is one pass: look at the unit (one done or halted needs nothing
// more), then, in one of the slots, claim it and run its work.
func (l *Loop) attempt(ctx context.Context, u fence.Shard, w Work, log *slog.Logger, electStart time.Time) error {
	f, err := w.Look(ctx)
	if err != nil {
		return err
	}
	if err := l.found(u, f, w); err != nil {
		return err
	}
	return l.withSlot(ctx, func() error {
		c, err := l.hold(ctx, u, w, electStart)
		if c != nil {
			defer l.Release(ctx, c.Lease)
		}
		if err != nil {
			return l.claimFailed(ctx, c, err)
		}
		if err := l.found(u, c.Found, w); err != nil {
			return err // done or halted between the look and the claim
		}
		l.emit(Event{Kind: Claimed, Unit: u, Token: c.Lease.Token(), Previous: c.Previous})
		return l.finish(ctx, c, w.Run(ctx, c))
	})
}

// found is errFoundDone or w's halted error when f says the unit needs
// no more work.
func (l *Loop) found(u fence.Shard, f Found, w Work) error {
	switch f.State {
	case cursor.Done:
		l.emit(Event{Kind: Done, Unit: u, ByOther: true, Token: f.Token})
		return errFoundDone
	case cursor.Halted:
		l.emit(Event{Kind: Halted, Unit: u, ByOther: true, Token: f.Token})
		return w.Halted()
	}
	return nil
}

// claimFailed classifies a failed claim: the lease held by another
// instance (a standby's wait), a token still not above the watermark or a
// lease lost while claiming (fenced), or a failure before any row was
// written (tried again).
func (l *Loop) claimFailed(ctx context.Context, c *Claim, err error) error {
	var held *lock.HeldError
	var rc errReclaim
	switch {
	case errors.As(err, &held):
		return err
	case c == nil:
		return errRetry{err}
	case errors.As(err, &rc) || c.Lease.Context().Err() != nil:
		return l.Fenced(ctx, c, err)
	}
	if p := c.Lease.Previous(); p.Owner != "" && !p.Released {
		// the lease was reclaimed; the business recovery failed
		l.emit(Event{Kind: RecoveryFailed, Unit: c.Unit, Token: c.Lease.Token()})
	}
	return errRetry{fmt.Errorf("takeover of %s: %w", c.Unit, err)}
}

// finish classifies what the work returned: done, taken again, halted,
// or fenced.
func (l *Loop) finish(ctx context.Context, c *Claim, err error) error {
	var again errRetry
	switch {
	case err == nil:
		l.emit(Event{Kind: Done, Unit: c.Unit, Token: c.Lease.Token()})
		return nil
	case errors.As(err, &again) && c.Lease.Context().Err() == nil:
		return err
	case errors.Is(err, ErrHalted):
		l.emit(Event{Kind: Halted, Unit: c.Unit, Token: c.Lease.Token()})
		return err
	}
	return l.Fenced(ctx, c, err)
}

// Fenced classifies an error that stopped a holder: a refused token or a
// lost lease becomes ErrFenced (a Fenced event); a cancelled run or
// anything else is returned as is.
func (l *Loop) Fenced(ctx context.Context, c *Claim, err error) error {
	var rc errReclaim
	switch {
	case errors.As(err, &rc):
		return err
	case errors.Is(err, fence.ErrStale):
		l.emit(Event{Kind: Fenced, Unit: c.Unit, Token: c.Lease.Token(), Stale: true})
		return fmt.Errorf("%w: %w", ErrFenced, err)
	case ctx.Err() != nil:
		return err
	case errors.Is(err, lock.ErrLost) || errors.Is(context.Cause(c.Lease.Context()), lock.ErrLost):
		l.emit(Event{Kind: Fenced, Unit: c.Unit, Token: c.Lease.Token()})
		return fmt.Errorf("%w: %w", ErrFenced, errLeaseLost{err, c.Lease.Token()})
	}
	return err
}

// errLeaseLost: the holder stopped writing because its lease ended (it
// could not renew in time, or the lock service no longer had it), not
// because a successor's token was refused to it.
type errLeaseLost struct {
	err   error
	token int64 // the lease's
}

func (e errLeaseLost) Error() string { return e.err.Error() }
func (e errLeaseLost) Unwrap() error { return e.err }

// withSlot runs fn holding one of the slots, waiting for one to free.
func (l *Loop) withSlot(ctx context.Context, fn func() error) error {
	if l.Slots == nil {
		return fn()
	}
	select {
	case l.Slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.Slots }()
	return fn()
}

// waitSlotFree returns once one of the slots is free, without taking it.
func (l *Loop) waitSlotFree(ctx context.Context) error {
	if l.Slots == nil {
		return nil
	}
	select {
	case l.Slots <- struct{}{}:
		<-l.Slots
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
