package etcdlock

import (
	"errors"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
)

// TestRenew_KeyDeleted: a renewal keeps the etcd lease alive, and still
// fails for good when an operator deleted the lease key alone, leaving
// the etcd lease behind.
func TestRenew_KeyDeleted(t *testing.T) {
	t.Parallel()
	d := dsn(t, testsvc.EtcdURL(t))
	b, admin := open(t, d), open(t, d)
	base := newBase(t, b)
	g, err := b.Acquire(t.Context(), base, "a", time.Second)
	if err != nil || g.Status != lock.Granted {
		t.Fatalf("acquire = %+v, %v", g, err)
	}
	if ok, err := b.Renew(t.Context(), base, "a", g.Token, time.Second); !ok || err != nil {
		t.Fatalf("renew = %v, %v", ok, err)
	}
	if _, err := admin.cli.Delete(t.Context(), b.keys(base).lease); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Renew(t.Context(), base, "a", g.Token, time.Second); ok || err != nil {
		t.Errorf("renew after the key was deleted = %v, %v; want false", ok, err)
	}
	if ok, err := b.Release(t.Context(), base, "a", g.Token); ok || err != nil {
		t.Errorf("release after the key was deleted = %v, %v; want false", ok, err)
	}
}

// TestClose_EndsCalls: Close ends a standby's wait at once, and every
// call after it fails at once, with ErrClosed (etcd's client would retry
// a call on its closed connection for seconds).
func TestClose_EndsCalls(t *testing.T) {
	t.Parallel()
	d := dsn(t, testsvc.EtcdURL(t))
	holder, standby := open(t, d), open(t, d)
	base := newBase(t, holder)
	le := mustAcquire(t, newLocker(t, holder, 10*time.Second), base, lock.NewOwnerID("a"))
	waited := make(chan error, 1)
	go func() { waited <- standby.WaitFree(t.Context(), base, "b", time.Second) }()
	time.Sleep(200 * time.Millisecond) // mostly, the wait watches by now; whatever it does, Close ends it
	if err := standby.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("WaitFree after Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitFree still waits 5s after Close")
	}
	start := time.Now()
	if _, err := standby.Inspect(t.Context(), base); !errors.Is(err, ErrClosed) {
		t.Errorf("Inspect after Close = %v, want ErrClosed", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Inspect after Close took %v", took)
	}
	if err := standby.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if le.Context().Err() != nil {
		t.Errorf("the holder lost its lease: %v", le.Context().Err())
	}
}
