package lock

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// recorder collects OnRenewFailure calls.
type recorder struct {
	mu   sync.Mutex
	errs []error
}

func (r *recorder) add(_ string, err error) { r.mu.Lock(); r.errs = append(r.errs, err); r.mu.Unlock() }

func (r *recorder) all() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// TestLease_Lost: a lease tampered with from outside is lost at its next
// renewal. The lease renews every 100ms but is valid for nearly 3s, so the
// renewal, however late a loaded machine runs it, comes before the local
// deadline: it is the renewal, not the deadline, that ends the lease.
func TestLease_Lost(t *testing.T) {
	rdb := sharedClient(t)
	const ttl, every = 3 * time.Second, 100 * time.Millisecond
	for _, tc := range []struct {
		name    string
		tamper  func(ctx context.Context, base string) error
		keyLeft bool // the lease key exists afterwards (someone else's)
	}{
		{"lease deleted from outside", func(ctx context.Context, base string) error {
			return rdb.Del(ctx, leaseKey(base)).Err()
		}, false},
		{"owner overwritten", func(ctx context.Context, base string) error {
			return rdb.HSet(ctx, leaseKey(base), "owner", "intruder").Err()
		}, true},
		{"token overwritten", func(ctx context.Context, base string) error {
			return rdb.HSet(ctx, leaseKey(base), "token", "999").Err()
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			l := newLocker(t, rdb, Options{TTL: ttl, RenewEvery: every, OnRenewFailure: rec.add})
			base := newBase(t, rdb)
			le := mustAcquire(t, l, base, NewOwnerID("a"))
			if err := tc.tamper(t.Context(), base); err != nil {
				t.Fatal(err)
			}
			deadline := le.Deadline() // not renewed since the grant: final
			end := waitDone(t, le, time.Until(deadline)+time.Second)
			if cause := context.Cause(le.Context()); cause != ErrLost {
				t.Fatalf("cause = %v, want ErrLost", cause)
			}
			if errs := rec.all(); len(errs) != 1 || !errors.Is(errs[0], ErrNotOwner) || !end.Before(deadline) {
				t.Errorf("renew failures = %v, lost %v before the deadline; want one ErrNotOwner, before it", errs, deadline.Sub(end))
			}
			// Not renewed: about TTL - RenewEvery left (a renewal would have
			// put it back near TTL); half a period of slack for the time
			// between the grant on the server and the client's renewal tick.
			pttl := rdb.PTTL(t.Context(), leaseKey(base)).Val()
			if tc.keyLeft && pttl > ttl-l.opts.RenewEvery/2 {
				t.Errorf("someone else's lease was renewed: pttl %v", pttl)
			}
			// Would a stray renewal bring it back? None can come once the
			// renewal goroutine has returned.
			select {
			case <-le.done:
			case <-time.After(10 * time.Second):
				t.Fatal("the renewal goroutine still runs 10s after the loss")
			}
			if !errors.Is(context.Cause(le.Context()), ErrLost) || alive(le) {
				t.Error("lease came back")
			}
			// The tampered key may have expired by now; if it is there, it
			// must still be the other holder's (owner or token not ours).
			got, err := rdb.HMGet(t.Context(), leaseKey(base), "owner", "token").Result()
			if err != nil {
				t.Fatal(err)
			}
			exists := got[0] != nil
			switch {
			case !tc.keyLeft && exists:
				t.Errorf("lease key re-created for %v", got[0])
			case exists && got[0] == le.Owner() && got[1] == strconv.FormatInt(le.Token(), 10):
				t.Error("lease key taken back")
			}
			if err := le.Release(t.Context()); !errors.Is(err, ErrNotOwner) {
				t.Errorf("release = %v, want ErrNotOwner", err)
			}
		})
	}
}

func TestLease_Deadline(t *testing.T) {
	t.Run("redis stopped mid-lease", func(t *testing.T) {
		srv := testsvc.StartRedis(t, false)
		rdb := newClient(t, srv.URL)
		var rec recorder
		const ttl = time.Second
		l := newLocker(t, rdb, Options{TTL: ttl, OnRenewFailure: rec.add})
		le := mustAcquire(t, l, "migrate:{stop}", NewOwnerID("a"))
		d0 := le.Deadline()
		for !le.Deadline().After(d0) { // one renewal done
			select {
			case <-le.Done():
				t.Fatalf("lease lost before its first renewal: %v", context.Cause(le.Context()))
			case <-time.After(5 * time.Millisecond):
			}
		}
		srv.Stop()
		stopped := time.Now()
		end := waitDone(t, le, ttl)
		last := le.Deadline() // final: nothing can extend it after the stop
		if cause := context.Cause(le.Context()); cause != ErrLost {
			t.Fatalf("cause = %v, want ErrLost", cause)
		}
		const slack = 100 * time.Millisecond // timer latency on a loaded machine with -race
		if end.Before(last) {
			t.Errorf("cancelled %v before the deadline", last.Sub(end))
		}
		if end.After(last.Add(slack)) {
			t.Errorf("cancelled %v after the deadline", end.Sub(last))
		}
		if v := l.opts.validity(); last.Sub(stopped) > v {
			t.Errorf("deadline %v after the stop, more than TTL-Drift-Margin %v", last.Sub(stopped), v)
		}
		errs := rec.all()
		if len(errs) == 0 {
			t.Error("no renewal failure reported while redis was down")
		}
		for _, err := range errs {
			if errors.Is(err, ErrNotOwner) {
				t.Errorf("unreachable redis reported as %v", err)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := le.Release(ctx); err == nil || errors.Is(err, ErrNotOwner) {
			t.Errorf("release with redis down = %v, want a network error", err)
		}
	})

	t.Run("acquire context ends the lease", func(t *testing.T) {
		rdb := sharedClient(t)
		l := newLocker(t, rdb, Options{TTL: 300 * time.Millisecond})
		base := newBase(t, rdb)
		ctx, cancel := context.WithCancel(t.Context())
		le, err := l.Acquire(ctx, base, NewOwnerID("a"))
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		waitDone(t, le, 50*time.Millisecond)
		if errors.Is(context.Cause(le.Context()), ErrLost) {
			t.Error("cancellation reported as loss")
		}
		if err := le.Release(t.Context()); err != nil { // still ours on the server
			t.Errorf("release = %v", err)
		}
	})
}

func TestLocker_WaitFree(t *testing.T) {
	rdb := sharedClient(t)
	const ttl = time.Second
	l := newLocker(t, rdb, Options{TTL: ttl})

	t.Run("free at once", func(t *testing.T) {
		// At once: before the first poll period (1s, less 20% jitter, with
		// a 10s TTL) could have ended; a Redis call, however slow a loaded
		// machine makes it, takes far less.
		lw := newLocker(t, rdb, Options{TTL: 10 * time.Second})
		ctx, cancel := context.WithTimeout(t.Context(), lw.opts.PollEvery*8/10)
		defer cancel()
		if err := lw.WaitFree(ctx, newBase(t, rdb)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("returns when the dead holder's lease expires", func(t *testing.T) {
		base := newBase(t, rdb)
		if _, err := l.acquire(t.Context(), base, NewOwnerID("dead")); err != nil { // no renewals: a dead process
			t.Fatal(err)
		}
		pttl := rdb.PTTL(t.Context(), leaseKey(base)).Val()
		start := time.Now()
		if err := l.WaitFree(t.Context(), base); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if took < pttl-5*time.Millisecond {
			t.Errorf("returned after %v, server PTTL was %v", took, pttl)
		}
		if max := pttl + l.opts.PollEvery + 100*time.Millisecond; took > max {
			t.Errorf("returned after %v, more than %v", took, max)
		}
		if n := rdb.Exists(t.Context(), leaseKey(base)).Val(); n != 0 {
			t.Error("lease still on the server")
		}
	})

	t.Run("waits while the holder renews", func(t *testing.T) {
		base := newBase(t, rdb)
		le := mustAcquire(t, l, base, NewOwnerID("live"))
		ctx, cancel := context.WithTimeout(t.Context(), 2*ttl)
		defer cancel()
		if err := l.WaitFree(ctx, base); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitFree = %v, want deadline exceeded", err)
		}
		if !alive(le) {
			t.Fatal("holder lost its lease")
		}
	})

	t.Run("redis errors do not end the wait", func(t *testing.T) {
		srv := testsvc.StartRedis(t, false)
		down := newClient(t, srv.URL)
		lb := newLocker(t, down, Options{TTL: ttl})
		srv.Stop()
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		if err := lb.WaitFree(ctx, "migrate:{down}"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitFree = %v, want deadline exceeded", err)
		}
	})
}

func TestLease_Previous(t *testing.T) {
	rdb := sharedClient(t)
	const ttl = 400 * time.Millisecond
	l := newLocker(t, rdb, Options{TTL: ttl})

	t.Run("first grant", func(t *testing.T) {
		le := mustAcquire(t, l, newBase(t, rdb), NewOwnerID("a"))
		if le.Previous() != (Holder{}) || le.Wait() != 0 {
			t.Errorf("previous %+v wait %v", le.Previous(), le.Wait())
		}
	})

	t.Run("takeover after expiry", func(t *testing.T) {
		base := newBase(t, rdb)
		dead := NewOwnerID("dead")
		start := time.Now()
		g, err := l.acquire(t.Context(), base, dead)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WaitFree(t.Context(), base); err != nil {
			t.Fatal(err)
		}
		le := mustAcquire(t, l, base, NewOwnerID("b"))
		took := time.Since(start)
		p := le.Previous()
		if p.Owner != dead || p.Token != g.token || p.Released || !p.RenewedAt.Equal(g.at) {
			t.Errorf("previous = %+v, want %s token %d at %v", p, dead, g.token, g.at)
		}
		// The server's times of both grants fall between start and now.
		if w := le.Wait(); w < ttl-time.Millisecond || w > took || w != le.AcquiredAt().Sub(g.at) {
			t.Errorf("wait = %v, want the %v between the grants by the server's clock: at least the TTL %v, at most the %v they took", w, le.AcquiredAt().Sub(g.at), ttl, took)
		}
		if le.Token() <= g.token {
			t.Errorf("token %d not above %d", le.Token(), g.token)
		}
		g2, err := l.acquire(t.Context(), base, le.Owner()) // a retried acquire reports the same
		if err != nil || g2.status != 2 || g2.prev != p || g2.token != le.Token() {
			t.Errorf("retry = %+v, %v", g2, err)
		}
	})

	t.Run("after a clean release", func(t *testing.T) {
		base := newBase(t, rdb)
		a := mustAcquire(t, l, base, NewOwnerID("a"))
		if err := a.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		le := mustAcquire(t, l, base, NewOwnerID("b"))
		p := le.Previous()
		if p.Owner != a.Owner() || p.Token != a.Token() || !p.Released || p.RenewedAt.Before(a.AcquiredAt()) {
			t.Errorf("previous = %+v", p)
		}
		if le.Wait() != 0 {
			t.Errorf("wait = %v after a clean release", le.Wait())
		}
		info, _ := l.Inspect(t.Context(), base)
		if info.Last.Owner != le.Owner() || info.Last.Released {
			t.Errorf("last = %+v", info.Last)
		}
	})
}
