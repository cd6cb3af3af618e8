// Package locktest is the lock contract's conformance suite: every lock
// service (lock.Backend) must pass it unchanged, against a real server. A
// backend's tests call Run with a Harness that opens the backend on a
// service address; the suite reaches the service through a fault-injecting
// proxy (netfault.Proxy) where a test needs the service cut off, and, with
// Harness.Private, restarts a private instance with and without its data.
//
// What it checks, for every backend:
//
//   - grants: a token strictly above every earlier one; a retried acquire
//     by the same owner gets the stored grant, no new token; another owner
//     is held off and can neither renew nor release
//   - renewal and loss: a lease taken away from outside is lost at the
//     next renewal; a service cut off ends the lease at the local
//     deadline, not before; the acquire context ends it
//   - release: compare-and-release, recorded as clean for the next holder
//   - standby wait: free at once, free when a dead holder's lease ends
//     (not before its TTL, not after MaxWait), never while the holder
//     renews, service errors do not end it
//   - the takeover record: the previous holder, its token and the wait
//   - L4: Raise puts every later token above a watermark, also after the
//     service restarted without its data
package locktest

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/netfault"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
)

// Harness is what the suite needs of one lock service.
type Harness struct {
	// Addr is the shared service's host:port (one member of it).
	Addr string
	// Open opens a backend on the service at addr (host:port), as one
	// process start would, with lease TTL ttl (ZooKeeper's session
	// timeout is fixed when it connects). The suite closes it.
	Open func(t *testing.T, addr string, ttl time.Duration) lock.Backend
	// TTL is the lease TTL of most tests; default 1s.
	TTL time.Duration
	// Tamper takes base's lease away from its holder from outside (an
	// operator's delete, a session killed), not through a Backend.
	Tamper func(t *testing.T, base string)
	// Private, if set, starts a private instance of the service for the
	// restart tests; it is stopped when the test ends.
	Private func(t *testing.T) Private
}

// Private is a private instance of a lock service.
type Private interface {
	Addr() string
	// Restart stops the service at once (SIGKILL) and starts it again on
	// the same address with its data.
	Restart()
	// RestartWiped does the same with none of its data: a replacement
	// that lost every lease and counter.
	RestartWiped()
}

// Run runs the conformance suite against the service of h.
func Run(t *testing.T, h Harness) {
	if h.TTL == 0 {
		h.TTL = time.Second
	}
	s := &suite{h: h}
	t.Run("Grant", s.testGrant)
	t.Run("RetriedAcquire", s.testRetried)
	t.Run("HeldOff", s.testHeldOff)
	t.Run("Arguments", s.testArguments)
	t.Run("Raise", s.testRaise)
	t.Run("LostToTamper", s.testTamper)
	t.Run("ServiceCutOff", s.testCutOff)
	t.Run("AcquireContext", s.testAcquireContext)
	t.Run("WaitFree", s.testWaitFree)
	t.Run("Previous", s.testPrevious)
	if h.Private != nil {
		t.Run("RestartKeepingData", s.testRestartKept)
		t.Run("RestartWithoutData", s.testRestartWiped)
	}
}

type suite struct{ h Harness }

// open opens a backend on addr, closed when the test ends.
func (s *suite) open(t *testing.T, addr string, ttl time.Duration) lock.Backend {
	t.Helper()
	b := s.h.Open(t, addr, ttl)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// locker is a Locker on a new backend of the shared service.
func (s *suite) locker(t *testing.T, opts lock.Options) *lock.Locker {
	t.Helper()
	if opts.TTL == 0 {
		opts.TTL = s.h.TTL
	}
	return s.lockerOn(t, s.open(t, s.h.Addr, opts.TTL), opts)
}

func (s *suite) lockerOn(t *testing.T, b lock.Backend, opts lock.Options) *lock.Locker {
	t.Helper()
	if opts.TTL == 0 {
		opts.TTL = s.h.TTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	l, err := lock.New(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// base is a lease name unique to the test, forgotten on the shared
// service when the test ends.
func (s *suite) base(t *testing.T) string {
	t.Helper()
	base := "migrate:{" + testsvc.Prefix(t) + "}"
	t.Cleanup(func() {
		b := s.h.Open(t, s.h.Addr, s.h.TTL)
		defer b.Close()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		_ = b.Forget(ctx, base)
	})
	return base
}

// proxy starts a fault-injecting proxy in front of addr.
func proxy(t *testing.T, addr string) *netfault.Proxy {
	t.Helper()
	p, err := netfault.NewProxy("lock", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// dead is a holder that dies as a SIGKILLed process does: it took base's
// lease (no renewal ever follows) and is then cut off from the service,
// so whatever the backend keeps alive by itself (a session's heartbeats)
// stops too. It returns the grant and when the holder was cut off.
func (s *suite) dead(t *testing.T, base, owner string, ttl time.Duration) (lock.Grant, time.Time) {
	t.Helper()
	p := proxy(t, s.h.Addr)
	b := s.open(t, p.Addr(), ttl)
	g, err := b.Acquire(t.Context(), base, owner, ttl)
	if err != nil || g.Status != lock.Granted {
		t.Fatalf("dead holder's acquire = %+v, %v", g, err)
	}
	if err := p.Cut(); err != nil {
		t.Fatal(err)
	}
	return g, time.Now()
}

func mustAcquire(t *testing.T, l *lock.Locker, base, owner string) *lock.Lease {
	t.Helper()
	le, err := l.Acquire(t.Context(), base, owner)
	if err != nil {
		t.Fatalf("acquire %s as %s: %v", base, owner, err)
	}
	t.Cleanup(func() {
		if errors.Is(context.Cause(le.Context()), lock.ErrLost) {
			return // not ours any more: nothing to give back (and maybe no way to)
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		_ = le.Release(ctx)
	})
	return le
}

// alive reports whether the lease's context is still live.
func alive(le *lock.Lease) bool { return le.Context().Err() == nil }

// WaitDone waits up to d for the lease to end and returns when it did. A
// lease already ended passes whatever d is (a select of two ready cases
// picks either: d may be negative when the caller computed it from a
// deadline before a slow restart).
func WaitDone(t *testing.T, le *lock.Lease, d time.Duration) time.Time {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-le.Done():
	case <-timer.C:
		if alive(le) {
			t.Fatalf("lease %s still live after %v (deadline in %v)", le.Key(), d, time.Until(le.Deadline()))
		}
	}
	return time.Now()
}

// validity is how long after a renewal was sent the holder trusts it.
func validity(o lock.Options) time.Duration { return o.TTL - o.Drift - o.Margin }

// isHeld reports whether err is a *lock.HeldError naming owner and token.
func isHeld(err error, owner string, token int64) bool {
	var held *lock.HeldError
	return errors.As(err, &held) && errors.Is(err, lock.ErrHeld) && held.Owner == owner && held.Token == token
}
