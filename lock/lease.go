package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is a granted lease. It renews itself in the background until Release,
// until it is lost, or until the context given to Acquire ends. Writing is
// allowed only while Context is not done. Its methods are safe for
// concurrent use.
type Lease struct {
	l          *Locker
	key, owner string
	g          Grant

	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the renewal goroutine has returned

	mu       sync.Mutex
	deadline time.Time   // local, monotonic: when the lease stops being trusted
	timer    *time.Timer // fires expire at deadline
}

// Acquire takes the lease named base for owner if it is free (L1), and keeps
// it renewed (L2) until Release, loss, or the end of ctx. It returns a
// *HeldError (errors.Is ErrHeld) when another owner holds it.
//
// If owner already holds the lease (a retry after a timeout), the stored token
// is returned without a new one being issued.
//
// The lease's Context is derived from ctx: cancelling ctx stops the renewals
// and ends the lease locally (call Release to free it on the service at
// once), so pass the context of the work, not one with a short timeout for
// this call.
func (l *Locker) Acquire(ctx context.Context, base, owner string) (*Lease, error) {
	if err := checkBase(base); err != nil {
		return nil, err
	}
	if owner == "" {
		return nil, errors.New("lock: empty owner id")
	}
	sent := time.Now()
	var g Grant
	err := l.bounded(ctx, "acquire", base, func(cctx context.Context) (err error) {
		g, err = l.b.Acquire(cctx, base, owner, l.opts.TTL)
		return err
	})
	if err != nil {
		return nil, err
	}
	if g.Status == Held {
		return nil, &HeldError{Key: base, Owner: g.Owner, Token: g.Token, TTL: g.TTL}
	}
	if took := time.Since(sent); took >= l.opts.validity() {
		// A grant that came back after its validity cannot be trusted for
		// a moment: the service was too slow to answer, an outage. It is
		// left to the service; the owner's next acquire gets it back
		// (Retried), renewed, or it expires at its TTL.
		return nil, Unavailable(fmt.Errorf("lock: acquire %s: the grant came back after %v, past the lease's validity of %v",
			base, took.Round(time.Millisecond), l.opts.validity()))
	}
	le := l.start(ctx, base, owner, g, sent)
	l.log.InfoContext(ctx, "lease acquired", attrKey, base, attrOwner, owner, attrToken, g.Token,
		"previous_owner", g.Prev.Owner, "wait", le.Wait(), "retried", g.Status == Retried, "service", l.b.String())
	return le, nil
}

// start builds the Lease for a grant whose request was sent at sent, and
// starts its deadline timer and renewal goroutine.
func (l *Locker) start(ctx context.Context, base, owner string, g Grant, sent time.Time) *Lease {
	lctx, cancel := context.WithCancelCause(ctx)
	le := &Lease{
		l: l, key: base, owner: owner, g: g,
		ctx: lctx, cancel: cancel, done: make(chan struct{}),
		deadline: sent.Add(l.opts.validity()),
	}
	le.mu.Lock()
	// A grant that came back after its validity never gets here
	// (Acquire); one at its very edge fires at once.
	le.timer = time.AfterFunc(time.Until(le.deadline), le.expire)
	le.mu.Unlock()
	go le.run(sent)
	return le
}

// Key returns the lease's base name.
func (le *Lease) Key() string { return le.key }

// Owner returns the owner id the lease was granted to.
func (le *Lease) Owner() string { return le.owner }

// Token returns the fencing token of this grant.
func (le *Lease) Token() int64 { return le.g.Token }

// Previous returns the holder recorded before this grant, or the zero Holder
// when there was none.
func (le *Lease) Previous() Holder { return le.g.Prev }

// AcquiredAt returns the time of the grant, by the service's clock where it
// has one (Grant.At).
func (le *Lease) AcquiredAt() time.Time { return le.g.At }

// Wait returns how long the lease stood unrenewed before this grant
// (Grant.Wait): 0 when there was no previous holder or it released cleanly.
func (le *Lease) Wait() time.Duration {
	if le.g.Prev.Owner == "" || le.g.Prev.Released {
		return 0
	}
	return max(le.g.Wait, 0)
}

// Context returns a context that is cancelled the moment the lease can no
// longer be trusted, with context.Cause ErrLost; by Release (context.Canceled);
// or when the context given to Acquire ends. It is never un-cancelled.
func (le *Lease) Context() context.Context { return le.ctx }

// Done is Context().Done().
func (le *Lease) Done() <-chan struct{} { return le.ctx.Done() }

// Deadline returns the local deadline on the monotonic clock: the send time of
// the last successful acquire or renewal plus TTL−Drift−Margin. Compare it
// with time.Now() only. Work that cannot finish before it must not start.
func (le *Lease) Deadline() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.deadline
}

// Release stops renewing, cancels Context, and frees the lease on the service
// if it is still ours (L3), recording a clean release. It returns
// ErrNotOwner when the lease was no longer ours; that is final, not to retry.
func (le *Lease) Release(ctx context.Context) error {
	le.mu.Lock()
	le.cancel(context.Canceled) // writers stop before the key goes
	le.timer.Stop()
	le.mu.Unlock()

	ok, err := le.l.b.Release(ctx, le.key, le.owner, le.g.Token)
	select { // a renewal in flight cannot re-create the key; wait it out
	case <-le.done:
	case <-ctx.Done(): // the goroutine ends as soon as its call returns
	}
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("lock: release %s token %d: %w", le.key, le.g.Token, ErrNotOwner)
	}
	le.l.log.InfoContext(ctx, "lease released", attrKey, le.key, attrOwner, le.owner, attrToken, le.g.Token)
	return nil
}

// run renews every RenewEvery (L2) until the lease ends. A "not the owner"
// reply is final; a failed call — or one with no reply within RenewEvery —
// is retried until the deadline timer ends the lease.
func (le *Lease) run(last time.Time) {
	defer close(le.done)
	opts := le.l.opts
	retry := max(opts.RenewEvery/4, 10*time.Millisecond)
	t := time.NewTimer(opts.RenewEvery - time.Since(last))
	defer t.Stop()
	for {
		select {
		case <-le.ctx.Done():
			le.stopTimer()
			return
		case <-t.C:
		}
		sent := time.Now()
		// le.ctx ends at the deadline, which bounds the call; a call that
		// hangs (a half-open connection, a partition) is given up after a
		// renewal period and tried again, before the deadline, on a
		// connection of its own.
		cctx, cancel := context.WithTimeout(le.ctx, opts.RenewEvery)
		ok, err := le.l.b.Renew(cctx, le.key, le.owner, le.g.Token, opts.TTL)
		cancel()
		if le.ctx.Err() != nil {
			continue // released, lost or cancelled meanwhile: whatever the reply, stop
		}
		switch {
		case err != nil:
			le.renewFailed(err)
			le.l.log.WarnContext(le.ctx, "lease renewal failed", attrKey, le.key, attrToken, le.g.Token,
				attrErr, err, "until_deadline", time.Until(le.Deadline()))
			t.Reset(retry)
		case !ok:
			le.renewFailed(ErrNotOwner)
			le.lose("renewal found another owner or no lease")
		default:
			le.extend(sent)
			t.Reset(opts.RenewEvery - time.Since(sent))
		}
	}
}

// extend moves the deadline after a renewal sent at sent succeeded. A
// renewal that comes back after the deadline does not revive the lease.
func (le *Lease) extend(sent time.Time) {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.ctx.Err() != nil {
		return
	}
	if !time.Now().Before(le.deadline) {
		le.loseLocked("local deadline passed before the renewal returned")
		return
	}
	if d := sent.Add(le.l.opts.validity()); d.After(le.deadline) {
		le.deadline = d
		le.timer.Reset(time.Until(d))
	}
}

// expire runs at the deadline timer: the lease is lost unless a renewal moved
// the deadline meanwhile.
func (le *Lease) expire() {
	le.mu.Lock()
	defer le.mu.Unlock()
	if d := time.Until(le.deadline); d > 0 {
		le.timer.Reset(d)
		return
	}
	le.loseLocked("local deadline passed with no successful renewal")
}

func (le *Lease) lose(why string) {
	le.mu.Lock()
	defer le.mu.Unlock()
	le.loseLocked(why)
}

func (le *Lease) loseLocked(why string) {
	if le.ctx.Err() != nil {
		return
	}
	le.cancel(ErrLost)
	le.timer.Stop()
	le.l.log.Error("lease lost", attrKey, le.key, attrOwner, le.owner, attrToken, le.g.Token, "reason", why)
}

func (le *Lease) stopTimer() {
	le.mu.Lock()
	le.timer.Stop()
	le.mu.Unlock()
}

func (le *Lease) renewFailed(err error) {
	if f := le.l.opts.OnRenewFailure; f != nil {
		f(le.key, err)
	}
}
