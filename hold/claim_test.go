package hold

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/lock"
)

// The real types are what the loop's interfaces say they are.
var (
	_ Leases = Locker{}
	_ Fence  = Target{}
	_ Lease  = (*lock.Lease)(nil)
)

// logRig is a rig whose loop logs to a buffer (read after Run returns).
func logRig(maxRetries int) (*rig, *bytes.Buffer) {
	r := newRig(maxRetries)
	var buf bytes.Buffer
	r.loop.Log = slog.New(slog.NewTextHandler(&buf, nil))
	return r, &buf
}

func TestRelease(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		err     error
		wantLog bool
	}{
		{"released", nil, false},
		{"no longer ours", fmt.Errorf("lock: release: %w", lock.ErrNotOwner), false},
		{"the service failed", errors.New("redis: i/o timeout"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, buf := logRig(0)
			l := r.lease(3)
			l.releaseErr = c.err
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a signal: the lease is still given back
			r.loop.Release(ctx, l)
			if l.releases() != 1 || !l.releaseLive {
				t.Errorf("released %d times, live context %v; want once, live", l.releases(), l.releaseLive)
			}
			if logged := strings.Contains(buf.String(), "lease release failed"); logged != c.wantLog {
				t.Errorf("logged %v, want %v: %s", logged, c.wantLog, buf)
			}
		})
	}
}

func TestHold_BreakFailureDoesNotStopTheClaim(t *testing.T) {
	t.Parallel()
	r, buf := logRig(0)
	r.grant(r.lease(4))
	r.fence.breakErr = errors.New("permission denied to terminate")
	start := time.Now()
	if err := r.run(context.Background()); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	r.wantTrace(t, "look acquire:4 break claim:4 resume:4 run:4 release:4")
	if !strings.Contains(buf.String(), "could not end the sessions") {
		t.Errorf("the failed break was not logged: %s", buf)
	}
	// Break is bounded by releaseTimeout.
	if d := r.fence.breakDeadline; d.IsZero() || d.After(start.Add(releaseTimeout+time.Second)) {
		t.Errorf("Break's deadline %v, want within %v", d, releaseTimeout)
	}
}

func TestHold_ReturnsTheClaim(t *testing.T) {
	t.Parallel()
	t.Run("claimed", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		l := r.lease(4)
		r.grant(l)
		last := Watermark{Token: 3, Owner: owner}
		r.fence.claims = []claimStep{{last: last}}
		c, err := r.loop.Hold(context.Background(), unit, r.work)
		if err != nil || c == nil {
			t.Fatalf("Hold = %v, %v", c, err)
		}
		if c.Unit != unit || c.Lease != Lease(l) || c.Last != last || c.Found.State != "running" || c.TakenOver() {
			t.Errorf("claim = %+v", c)
		}
		if l.releases() != 0 {
			t.Errorf("Hold released the lease it returns")
		}
	})
	t.Run("a failed claim keeps its lease for the caller", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		l := r.lease(4)
		r.grant(l)
		boom := errors.New("boom")
		r.work.resumes = []resumeStep{{err: boom}}
		c, err := r.loop.Hold(context.Background(), unit, r.work)
		if !errors.Is(err, boom) || c == nil || c.Lease != Lease(l) || l.releases() != 0 {
			t.Fatalf("Hold = %+v, %v; want the claim, its lease still held, beside the error", c, err)
		}
	})
	t.Run("a stale claim whose lease ended is not reclaimed", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		l := r.lease(4)
		l.lose()
		r.grant(l, r.lease(9))
		r.fence.claims = []claimStep{stale(8)}
		c, err := r.loop.Hold(context.Background(), unit, r.work)
		var rc errReclaim
		if !errors.As(err, &rc) || rc.watermark != 8 || c == nil || c.Lease != Lease(l) {
			t.Fatalf("Hold = %+v, %v; want the claim and its errReclaim", c, err)
		}
		r.wantTrace(t, "acquire:4 break claim:4")
		if len(r.leases.raised) != 0 {
			t.Errorf("tokens raised after the lease ended: %v", r.leases.raised)
		}
	})
	t.Run("held", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		held := &lock.HeldError{Owner: "other", Token: 2}
		r.refuse(held)
		c, err := r.loop.Hold(context.Background(), unit, r.work)
		if c != nil || err != held {
			t.Fatalf("Hold = %v, %v; want nil, the HeldError", c, err)
		}
	})
}

// fakeBackend is a lock service for a real lock.Locker.
type fakeBackend struct {
	grant lock.Grant
	err   error

	mu       sync.Mutex
	raised   []int64
	released int
}

func (b *fakeBackend) Acquire(context.Context, string, string, time.Duration) (lock.Grant, error) {
	return b.grant, b.err
}
func (b *fakeBackend) Renew(context.Context, string, string, int64, time.Duration) (bool, error) {
	return true, nil
}
func (b *fakeBackend) Release(context.Context, string, string, int64) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released++
	return true, nil
}
func (b *fakeBackend) Inspect(context.Context, string) (lock.Info, error) { return lock.Info{}, nil }
func (b *fakeBackend) Raise(_ context.Context, _ string, atLeast int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.raised = append(b.raised, atLeast)
	return nil
}
func (b *fakeBackend) WaitFree(context.Context, string, string, time.Duration) error { return nil }
func (b *fakeBackend) Forget(context.Context, string) error                          { return nil }
func (b *fakeBackend) MaxWait(ttl, _ time.Duration) time.Duration                    { return ttl }
func (b *fakeBackend) Ping(context.Context) error                                    { return nil }
func (b *fakeBackend) Close() error                                                  { return nil }
func (b *fakeBackend) String() string                                                { return "fake" }

func newLocker(t *testing.T, b *fakeBackend) Locker {
	t.Helper()
	lk, err := lock.New(b, lock.Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return Locker{lk}
}

func TestLocker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("held: a nil Lease, not a typed nil", func(t *testing.T) {
		t.Parallel()
		l := newLocker(t, &fakeBackend{grant: lock.Grant{Status: lock.Held, Owner: "other", Token: 7}})
		le, err := l.Acquire(ctx, Base(unit), owner)
		var held *lock.HeldError
		if le != nil || !errors.As(err, &held) || held.Owner != "other" || held.Token != 7 {
			t.Fatalf("Acquire = %#v, %v; want nil, a HeldError", le, err)
		}
		if n, _ := decide(ctx, err); n != nextStandby {
			t.Errorf("the Locker's HeldError is not a standby")
		}
	})
	t.Run("failed: a nil Lease", func(t *testing.T) {
		t.Parallel()
		l := newLocker(t, &fakeBackend{err: errors.New("no server")})
		if le, err := l.Acquire(ctx, Base(unit), owner); le != nil || err == nil {
			t.Fatalf("Acquire = %#v, %v; want nil, an error", le, err)
		}
	})
	t.Run("granted", func(t *testing.T) {
		t.Parallel()
		prev := lock.Holder{Owner: "old", Token: 6}
		b := &fakeBackend{grant: lock.Grant{Status: lock.Granted, Owner: owner, Token: 7, Prev: prev, Wait: time.Second, At: time.Now()}}
		l := newLocker(t, b)
		le, err := l.Acquire(ctx, Base(unit), owner)
		if err != nil || le == nil {
			t.Fatalf("Acquire = %v, %v", le, err)
		}
		if le.Token() != 7 || le.Owner() != owner || le.Key() != Base(unit) || le.Previous() != prev || le.Wait() != time.Second {
			t.Errorf("lease: token %d owner %q key %q previous %+v wait %v", le.Token(), le.Owner(), le.Key(), le.Previous(), le.Wait())
		}
		if err := le.Release(ctx); err != nil || le.Context().Err() == nil || b.released != 1 {
			t.Errorf("Release = %v, context %v, service releases %d", err, le.Context().Err(), b.released)
		}
		if err := l.RaiseToken(ctx, Base(unit), 11); err != nil || len(b.raised) != 1 || b.raised[0] != 11 {
			t.Errorf("RaiseToken = %v, raised %v", err, b.raised)
		}
	})
}
