package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/lock"
)

// slack is what a loaded machine (two cores, -race) may add to a wait.
const slack = 300 * time.Millisecond

// testWaitFree: a standby's wait ends when the service frees the lease —
// at once when it is free, when a dead holder's lease ends (not before its
// TTL, not after MaxWait), never while the holder renews — and service
// errors do not end it.
func (s *suite) testWaitFree(t *testing.T) {
	t.Run("free at once", func(t *testing.T) {
		t.Parallel()
		// At once: before the first poll period (1s, less 20% jitter, with
		// a 10s TTL) could have ended; one request, however slow a loaded
		// machine makes it, takes far less.
		l := s.locker(t, lock.Options{TTL: 10 * time.Second})
		ctx, cancel := context.WithTimeout(t.Context(), l.Options().PollEvery*8/10)
		defer cancel()
		if err := l.WaitFree(ctx, s.base(t), lock.NewOwnerID("b")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("returns when the dead holder's lease ends", func(t *testing.T) {
		t.Parallel()
		l := s.locker(t, lock.Options{})
		ttl := l.Options().TTL
		base := s.base(t)
		start := time.Now()
		dead := lock.NewOwnerID("dead")
		s.dead(t, base, dead, ttl)
		cut := time.Now()
		if err := l.WaitFree(t.Context(), base, lock.NewOwnerID("b")); err != nil {
			t.Fatal(err)
		}
		freed := time.Now()
		if took := freed.Sub(start); took < ttl-5*time.Millisecond {
			t.Errorf("returned %v after the dead holder's grant, before its TTL %v", took, ttl)
		}
		if max := l.MaxWait() + slack; freed.Sub(cut) > max {
			t.Errorf("returned %v after the holder died, more than MaxWait %v and %v of slack", freed.Sub(cut), l.MaxWait(), slack)
		}
		if info, err := l.Inspect(t.Context(), base); err != nil || info.Held && info.Owner == dead {
			t.Errorf("inspect after the wait = %+v, %v: still the dead holder's", info, err)
		}
	})

	t.Run("waits while the holder renews", func(t *testing.T) {
		t.Parallel()
		l := s.locker(t, lock.Options{})
		ttl := l.Options().TTL
		base := s.base(t)
		le := mustAcquire(t, s.locker(t, lock.Options{}), base, lock.NewOwnerID("live"))
		ctx, cancel := context.WithTimeout(t.Context(), 2*ttl)
		defer cancel()
		if err := l.WaitFree(ctx, base, lock.NewOwnerID("b")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitFree = %v, want deadline exceeded", err)
		}
		if !alive(le) {
			t.Fatal("holder lost its lease")
		}
	})

	t.Run("service errors do not end the wait", func(t *testing.T) {
		t.Parallel()
		p := proxy(t, s.h.Addr)
		l := s.lockerOn(t, s.open(t, p.Addr(), s.h.TTL), lock.Options{})
		base := s.base(t)
		if err := p.Cut(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*l.Options().PollEvery)
		defer cancel()
		if err := l.WaitFree(ctx, base, lock.NewOwnerID("b")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitFree = %v, want deadline exceeded", err)
		}
	})
}

// testPrevious: a grant names the holder before it — none at first; a
// dead one with its token and how long the lease stood unrenewed; one
// that released cleanly, with no wait.
func (s *suite) testPrevious(t *testing.T) {
	t.Run("first grant", func(t *testing.T) {
		t.Parallel()
		le := mustAcquire(t, s.locker(t, lock.Options{}), s.base(t), lock.NewOwnerID("a"))
		if le.Previous() != (lock.Holder{}) || le.Wait() != 0 {
			t.Errorf("previous %+v wait %v", le.Previous(), le.Wait())
		}
	})

	t.Run("takeover after expiry", func(t *testing.T) {
		t.Parallel()
		l := s.locker(t, lock.Options{})
		ttl := l.Options().TTL
		base := s.base(t)
		dead := lock.NewOwnerID("dead")
		start := time.Now()
		g, _ := s.dead(t, base, dead, ttl)
		owner := lock.NewOwnerID("b")
		if err := l.WaitFree(t.Context(), base, owner); err != nil {
			t.Fatal(err)
		}
		le := mustAcquire(t, l, base, owner)
		took := time.Since(start)
		p := le.Previous()
		if p.Owner != dead || p.Token != g.Token || p.Released {
			t.Errorf("previous = %+v, want %s token %d, not released", p, dead, g.Token)
		}
		// A service's clock counts in milliseconds: a millisecond of
		// rounding either way.
		if w := le.Wait(); w < ttl-time.Millisecond || w > took+time.Millisecond {
			t.Errorf("wait = %v, want at least the TTL %v, at most the %v the takeover took", w, ttl, took)
		}
		if le.Token() <= g.Token {
			t.Errorf("token %d not above %d", le.Token(), g.Token)
		}
	})

	t.Run("after a clean release", func(t *testing.T) {
		t.Parallel()
		l := s.locker(t, lock.Options{})
		base := s.base(t)
		a := mustAcquire(t, s.locker(t, lock.Options{}), base, lock.NewOwnerID("a"))
		if err := a.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		owner := lock.NewOwnerID("b")
		if err := l.WaitFree(t.Context(), base, owner); err != nil {
			t.Fatal(err)
		}
		le := mustAcquire(t, l, base, owner)
		p := le.Previous()
		if p.Owner != a.Owner() || p.Token != a.Token() || !p.Released {
			t.Errorf("previous = %+v, want %s token %d, released", p, a.Owner(), a.Token())
		}
		if le.Wait() != 0 {
			t.Errorf("wait = %v after a clean release", le.Wait())
		}
		info, err := l.Inspect(t.Context(), base)
		if err != nil || info.Last.Owner != le.Owner() || info.Last.Token != le.Token() || info.Last.Released {
			t.Errorf("last = %+v, %v", info.Last, err)
		}
	})
}
