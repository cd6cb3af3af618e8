package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/lock"
)

// testGrant: a lease is granted, renewed past several TTLs, inspected,
// released (and only once); tokens rise strictly across grants.
func (s *suite) testGrant(t *testing.T) {
	t.Parallel()
	l := s.locker(t, lock.Options{})
	ttl := l.Options().TTL
	base := s.base(t)
	owner := lock.NewOwnerID("a")
	le := mustAcquire(t, l, base, owner)
	if le.Token() <= 0 || le.Owner() != owner || le.Key() != base {
		t.Fatalf("lease = %s %s %d", le.Key(), le.Owner(), le.Token())
	}
	d0 := le.Deadline()
	time.Sleep(3 * ttl) // several TTLs: only renewals keep it
	if !alive(le) {
		t.Fatalf("lease ended while renewing: %v", context.Cause(le.Context()))
	}
	if d1 := le.Deadline(); !d1.After(d0.Add(2 * ttl)) {
		t.Errorf("deadline moved from %v to %v only", d0, d1)
	}
	info, err := l.Inspect(t.Context(), base)
	if err != nil || !info.Held || info.Owner != owner || info.Token != le.Token() || info.TTL < 0 || info.TTL > ttl {
		t.Fatalf("inspect = %+v, %v", info, err)
	}
	if err := le.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(le.Context()), context.Canceled) {
		t.Errorf("cause after release = %v", context.Cause(le.Context()))
	}
	if info, err := l.Inspect(t.Context(), base); err != nil || info.Held {
		t.Fatalf("inspect after release = %+v, %v", info, err)
	}
	if err := le.Release(t.Context()); !errors.Is(err, lock.ErrNotOwner) {
		t.Errorf("second release = %v, want ErrNotOwner", err)
	}
	prev := le.Token()
	other := s.locker(t, lock.Options{}) // another process
	for _, by := range []*lock.Locker{other, l, other} {
		le2 := mustAcquire(t, by, base, lock.NewOwnerID("b"))
		if le2.Token() <= prev {
			t.Fatalf("token %d after %d", le2.Token(), prev)
		}
		prev = le2.Token()
		if err := le2.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// testRetried: an acquire the same owner sends again (its reply was lost)
// gets the stored grant, without a new token.
func (s *suite) testRetried(t *testing.T) {
	t.Parallel()
	ttl := s.h.TTL
	b := s.open(t, s.h.Addr, ttl)
	base := s.base(t)
	owner := lock.NewOwnerID("a")
	g1, err := b.Acquire(t.Context(), base, owner, ttl) // the first try, reply "lost"
	if err != nil || g1.Status != lock.Granted {
		t.Fatalf("acquire = %+v, %v", g1, err)
	}
	g2, err := b.Acquire(t.Context(), base, owner, ttl) // the retry
	if err != nil || g2.Status != lock.Retried || g2.Token != g1.Token || g2.Owner != owner {
		t.Fatalf("retry = %+v, %v; first %+v", g2, err, g1)
	}
	le := mustAcquire(t, s.lockerOn(t, b, lock.Options{TTL: ttl}), base, owner) // a third through the Locker
	if le.Token() != g1.Token {
		t.Errorf("token %d through the Locker, want %d", le.Token(), g1.Token)
	}
	if info, err := b.Inspect(t.Context(), base); err != nil || info.Owner != owner || info.Token != g1.Token {
		t.Errorf("inspect = %+v, %v; want held by %s with token %d", info, err, owner, g1.Token)
	}
}

// testHeldOff: a second owner is refused with the holder's name, and can
// neither renew nor release the holder's lease.
func (s *suite) testHeldOff(t *testing.T) {
	t.Parallel()
	la := s.locker(t, lock.Options{})
	ttl := la.Options().TTL
	ob := s.open(t, s.h.Addr, ttl) // another process
	lb := s.lockerOn(t, ob, lock.Options{TTL: ttl})
	base := s.base(t)
	a, b := lock.NewOwnerID("a"), lock.NewOwnerID("b")
	le := mustAcquire(t, la, base, a)
	_, err := lb.Acquire(t.Context(), base, b)
	var held *lock.HeldError
	if !isHeld(err, a, le.Token()) || !errors.As(err, &held) || held.Key != base || held.TTL < 0 || held.TTL > ttl {
		t.Fatalf("second acquire = %v, want held by %s with token %d", err, a, le.Token())
	}
	ctx := t.Context()
	if ok, err := ob.Renew(ctx, base, b, le.Token(), ttl); ok || err != nil {
		t.Errorf("renew by another owner = %v, %v", ok, err)
	}
	if ok, err := ob.Release(ctx, base, b, le.Token()); ok || err != nil {
		t.Errorf("release by another owner = %v, %v", ok, err)
	}
	if ok, err := ob.Release(ctx, base, a, le.Token()+1); ok || err != nil {
		t.Errorf("release with another token = %v, %v", ok, err)
	}
	if ok, err := ob.Renew(ctx, base, a, le.Token()+1, ttl); ok || err != nil {
		t.Errorf("renew with another token = %v, %v", ok, err)
	}
	info, err := lb.Inspect(ctx, base)
	if err != nil || !info.Held || info.Owner != a || info.Token != le.Token() {
		t.Errorf("after the other's attempts: %+v, %v", info, err)
	}
	if err := lb.Forget(ctx, base); err == nil {
		t.Error("a held lease was forgotten")
	}
	if !alive(le) {
		t.Error("holder lost its lease")
	}
}

// testArguments: an empty lease name or owner is refused.
func (s *suite) testArguments(t *testing.T) {
	t.Parallel()
	l := s.locker(t, lock.Options{})
	if _, err := l.Acquire(t.Context(), "", "x"); err == nil {
		t.Error("empty base accepted")
	}
	if _, err := l.Acquire(t.Context(), s.base(t), ""); err == nil {
		t.Error("empty owner accepted")
	}
	if err := l.RaiseToken(t.Context(), s.base(t), -1); err == nil {
		t.Error("negative raise accepted")
	}
}

// testRaise: after Raise(100), every grant's token is above 100; a lower
// Raise changes nothing.
func (s *suite) testRaise(t *testing.T) {
	t.Parallel()
	l := s.locker(t, lock.Options{})
	base := s.base(t)
	first := mustAcquire(t, l, base, lock.NewOwnerID("a"))
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	floor := first.Token() + 100
	if err := l.RaiseToken(t.Context(), base, floor); err != nil {
		t.Fatal(err)
	}
	if err := l.RaiseToken(t.Context(), base, floor-60); err != nil {
		t.Fatal(err)
	}
	prev := floor
	for range 2 {
		le := mustAcquire(t, l, base, lock.NewOwnerID("b"))
		if le.Token() <= prev {
			t.Fatalf("token %d after a raise to %d and %d", le.Token(), floor, prev)
		}
		prev = le.Token()
		if err := le.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
