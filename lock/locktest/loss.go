package locktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/lock"
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

// testTamper: a lease taken away from outside is lost at the next renewal
// — well before the local deadline, which a lease renewed every 100ms
// but valid for nearly 3s does not reach — and never taken back.
func (s *suite) testTamper(t *testing.T) {
	t.Parallel()
	ttl := max(3*time.Second, s.h.TTL)
	var rec recorder
	l := s.locker(t, lock.Options{TTL: ttl, RenewEvery: 100 * time.Millisecond, OnRenewFailure: rec.add})
	base := s.base(t)
	le := mustAcquire(t, l, base, lock.NewOwnerID("a"))
	s.h.Tamper(t, base)
	tampered := time.Now()
	end := WaitDone(t, le, time.Until(le.Deadline())+time.Second)
	if cause := context.Cause(le.Context()); cause != lock.ErrLost {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	errs := rec.all()
	if len(errs) == 0 || !errors.Is(errs[len(errs)-1], lock.ErrNotOwner) {
		t.Errorf("renew failures = %v, want ErrNotOwner last", errs)
	}
	if limit := validity(l.Options()) / 2; end.Sub(tampered) > limit {
		t.Errorf("lost %v after the tamper, want at the next renewal (within %v)", end.Sub(tampered), limit)
	}
	time.Sleep(300 * time.Millisecond) // a stray renewal would have run by now
	if info, err := l.Inspect(t.Context(), base); err != nil || info.Held && info.Owner == le.Owner() && info.Token == le.Token() {
		t.Errorf("inspect after the loss = %+v, %v: the lease was taken back", info, err)
	}
	if err := le.Release(t.Context()); !errors.Is(err, lock.ErrNotOwner) {
		t.Errorf("release = %v, want ErrNotOwner", err)
	}
}

// testCutOff: with the service unreachable, the holder stops trusting its
// lease at its local deadline — not before, and not much after — and
// reports the failed renewals as network errors, not as a lost lease; a
// new acquire ends as an outage (ErrUnavailable) within its bound.
func (s *suite) testCutOff(t *testing.T) {
	t.Parallel()
	p := proxy(t, s.h.Addr)
	var rec recorder
	l := s.lockerOn(t, s.open(t, p.Addr(), s.h.TTL), lock.Options{OnRenewFailure: rec.add})
	le := mustAcquire(t, l, s.base(t), lock.NewOwnerID("a"))
	d0 := le.Deadline()
	for !le.Deadline().After(d0) { // one renewal done
		select {
		case <-le.Done():
			t.Fatalf("lease lost before its first renewal: %v", context.Cause(le.Context()))
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := p.Cut(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	end := WaitDone(t, le, s.h.TTL+time.Second)
	last := le.Deadline() // final: nothing can extend it after the cut
	if cause := context.Cause(le.Context()); cause != lock.ErrLost {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	const slack = 100 * time.Millisecond // timer latency on a loaded machine with -race
	if end.Before(last) {
		t.Errorf("cancelled %v before the deadline", last.Sub(end))
	}
	if end.After(last.Add(slack)) {
		t.Errorf("cancelled %v after the deadline", end.Sub(last))
	}
	if v := validity(l.Options()); last.Sub(cut) > v {
		t.Errorf("deadline %v after the cut, more than TTL-Drift-Margin %v", last.Sub(cut), v)
	}
	errs := rec.all()
	if len(errs) == 0 {
		t.Error("no renewal failure reported while the service was cut off")
	}
	for _, err := range errs {
		if errors.Is(err, lock.ErrNotOwner) {
			t.Errorf("an unreachable service reported as %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := le.Release(ctx); err == nil || errors.Is(err, lock.ErrNotOwner) {
		t.Errorf("release with the service cut off = %v, want a network error", err)
	}
	// An acquire with a context of no deadline (a run's) is not stuck
	// for ever on the cut-off service: the Locker's bound ends it, as an
	// outage.
	start := time.Now()
	_, err := l.Acquire(context.WithoutCancel(t.Context()), s.base(t), lock.NewOwnerID("b"))
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("acquire with the service cut off = %v, want ErrUnavailable", err)
	}
	if took, limit := time.Since(start), max(s.h.TTL, 5*time.Second)+2*time.Second; took > limit {
		t.Errorf("acquire with the service cut off took %v, more than %v", took, limit)
	}
}

// testAcquireContext: cancelling the context given to Acquire ends the
// lease locally, as a cancellation (not a loss); on the service it is
// still the holder's until released.
func (s *suite) testAcquireContext(t *testing.T) {
	t.Parallel()
	l := s.locker(t, lock.Options{})
	base := s.base(t)
	ctx, cancel := context.WithCancel(t.Context())
	le, err := l.Acquire(ctx, base, lock.NewOwnerID("a"))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	WaitDone(t, le, 100*time.Millisecond)
	if errors.Is(context.Cause(le.Context()), lock.ErrLost) {
		t.Error("cancellation reported as loss")
	}
	if info, err := l.Inspect(t.Context(), base); err != nil || !info.Held || info.Owner != le.Owner() {
		t.Errorf("inspect after the cancel = %+v, %v; want still held", info, err)
	}
	if err := le.Release(t.Context()); err != nil {
		t.Errorf("release = %v", err)
	}
}
