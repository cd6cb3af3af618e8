package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/lock"
)

// testRestartKept: the service restarts with its data under a held lease.
// The holder either keeps it (renewals reach the service again before its
// deadline; nobody else is granted it meanwhile) or loses it as ErrLost;
// either way the next grant's token is above the holder's.
func (s *suite) testRestartKept(t *testing.T) {
	t.Parallel()
	p := s.h.Private(t)
	ttl := max(2*time.Second, s.h.TTL)
	l := s.lockerOn(t, s.open(t, p.Addr(), ttl), lock.Options{TTL: ttl})
	other := s.lockerOn(t, s.open(t, p.Addr(), ttl), lock.Options{TTL: ttl})
	base := "migrate:{restart}"
	le := mustAcquire(t, l, base, lock.NewOwnerID("a"))
	p.Restart()
	restarted := time.Now()
	// Wait until a renewal sent after the restart came back, or the lease
	// ended.
	for alive(le) && !le.Deadline().After(restarted.Add(validity(l.Options()))) {
		select {
		case <-le.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	if alive(le) {
		t.Logf("the holder kept its lease across the restart")
		owner := lock.NewOwnerID("b")
		if _, err := other.Acquire(t.Context(), base, owner); !isHeld(err, le.Owner(), le.Token()) {
			t.Fatalf("another owner after the restart: %v, want held by %s token %d", err, le.Owner(), le.Token())
		}
		if err := le.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	} else if cause := context.Cause(le.Context()); cause != lock.ErrLost {
		t.Fatalf("the holder's lease ended with %v, want ErrLost", cause)
	} else {
		t.Logf("the holder lost its lease across the restart")
	}
	owner := lock.NewOwnerID("b")
	if err := other.WaitFree(t.Context(), base, owner); err != nil {
		t.Fatal(err)
	}
	next := mustAcquire(t, other, base, owner)
	if next.Token() <= le.Token() {
		t.Errorf("token %d after the restart, not above the holder's %d", next.Token(), le.Token())
	}
}

// testRestartWiped is L4: the service comes back with none of its data.
// The holder learns it lost its lease at its next renewal or at its
// deadline at the latest; once the runner raises the service's tokens to
// the target's watermark, the next grant is above every earlier token.
func (s *suite) testRestartWiped(t *testing.T) {
	t.Parallel()
	p := s.h.Private(t)
	ttl := max(2*time.Second, s.h.TTL)
	l := s.lockerOn(t, s.open(t, p.Addr(), ttl), lock.Options{TTL: ttl})
	base := "migrate:{wiped}"
	var last int64
	for range 3 {
		le := mustAcquire(t, l, base, lock.NewOwnerID("a"))
		if le.Token() <= last {
			t.Fatalf("token %d after %d: not increasing", le.Token(), last)
		}
		last = le.Token()
		if err := le.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	held := mustAcquire(t, l, base, lock.NewOwnerID("a"))
	last = held.Token()
	p.RestartWiped()
	WaitDone(t, held, time.Until(held.Deadline())+time.Second)
	if cause := context.Cause(held.Context()); cause != lock.ErrLost {
		t.Errorf("holder's cause after the data loss = %v", cause)
	}
	// The target's watermark says `last`: raise before taking the lease.
	other := s.lockerOn(t, s.open(t, p.Addr(), ttl), lock.Options{TTL: ttl})
	if err := other.RaiseToken(t.Context(), base, last); err != nil {
		t.Fatal(err)
	}
	owner := lock.NewOwnerID("b")
	if err := other.WaitFree(t.Context(), base, owner); err != nil {
		t.Fatal(err)
	}
	le := mustAcquire(t, other, base, owner)
	if le.Token() <= last {
		t.Errorf("token %d after the data loss and a raise to %d", le.Token(), last)
	}
}
