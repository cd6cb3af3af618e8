package lock

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

func TestNew(t *testing.T) {
	rdb := sharedClient(t)
	t.Run("defaults", func(t *testing.T) {
		l := newLocker(t, rdb, Options{TTL: 3 * time.Second})
		o := l.Options()
		want := Options{TTL: 3 * time.Second, RenewEvery: time.Second, Drift: 30 * time.Millisecond,
			Margin: 300 * time.Millisecond, PollEvery: 300 * time.Millisecond}
		if o.RenewEvery != want.RenewEvery || o.Drift != want.Drift || o.Margin != want.Margin || o.PollEvery != want.PollEvery {
			t.Errorf("options = %+v, want %+v", o, want)
		}
		if o.Logger == nil {
			t.Error("nil logger")
		}
	})
	t.Run("drift and poll are clamped", func(t *testing.T) {
		o := newLocker(t, rdb, Options{TTL: time.Second, Drift: time.Millisecond, PollEvery: time.Second}).Options()
		if o.Drift != 10*time.Millisecond || o.PollEvery != 100*time.Millisecond {
			t.Errorf("drift %v poll %v, want 10ms and 100ms", o.Drift, o.PollEvery)
		}
	})
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"no TTL", Options{}},
		{"tiny TTL", Options{TTL: time.Millisecond}},
		{"renew after deadline", Options{TTL: time.Second, RenewEvery: 900 * time.Millisecond}},
		{"negative renew", Options{TTL: time.Second, RenewEvery: -time.Second}},
		{"negative margin", Options{TTL: time.Second, Margin: -time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(rdb, tc.opts); err == nil {
				t.Errorf("New(%+v) accepted", tc.opts)
			}
		})
	}
}

func TestNewOwnerID(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9._-]+-[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for _, in := range []string{"node-1", "", "a b/c:d", strings.Repeat("x", 200), "node-1"} {
		id := NewOwnerID(in)
		if !re.MatchString(id) {
			t.Errorf("NewOwnerID(%q) = %q", in, id)
		}
		if len(id) > 64+1+32 {
			t.Errorf("NewOwnerID(%q) too long: %d", in, len(id))
		}
		if seen[id] {
			t.Errorf("NewOwnerID(%q) repeated %q", in, id)
		}
		seen[id] = true
	}
	if id := NewOwnerID("a b"); !strings.HasPrefix(id, "a_b-") {
		t.Errorf("not sanitised: %q", id)
	}
}

func TestLocker_Acquire(t *testing.T) {
	rdb := sharedClient(t)
	const ttl = time.Second
	l := newLocker(t, rdb, Options{TTL: ttl})

	t.Run("grant renew release", func(t *testing.T) {
		base := newBase(t, rdb)
		owner := NewOwnerID("a")
		le := mustAcquire(t, l, base, owner)
		if le.Token() != 1 || le.Owner() != owner || le.Key() != base {
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
		if err != nil || !info.Held || info.Owner != owner || info.Token != 1 || info.TTL <= 0 || info.Counter != 1 {
			t.Fatalf("inspect = %+v, %v", info, err)
		}
		if err := le.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(context.Cause(le.Context()), context.Canceled) {
			t.Errorf("cause after release = %v", context.Cause(le.Context()))
		}
		if n := rdb.Exists(t.Context(), leaseKey(base)).Val(); n != 0 {
			t.Fatal("lease key still exists after release")
		}
		if err := le.Release(t.Context()); !errors.Is(err, ErrNotOwner) {
			t.Errorf("second release = %v, want ErrNotOwner", err)
		}
		var prev int64 = 1
		for range 3 { // tokens rise strictly across grants
			le2 := mustAcquire(t, l, base, NewOwnerID("b"))
			if le2.Token() <= prev {
				t.Fatalf("token %d after %d", le2.Token(), prev)
			}
			prev = le2.Token()
			if err := le2.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("retried acquire by the same owner", func(t *testing.T) {
		base := newBase(t, rdb)
		owner := NewOwnerID("a")
		g1, err := l.acquire(t.Context(), base, owner) // the first try, reply "lost"
		if err != nil || g1.status != 1 {
			t.Fatalf("acquire = %+v, %v", g1, err)
		}
		g2, err := l.acquire(t.Context(), base, owner) // the retry
		if err != nil || g2.status != 2 || g2.token != g1.token || !g2.at.Equal(g1.at) {
			t.Fatalf("retry = %+v, %v; first %+v", g2, err, g1)
		}
		le := mustAcquire(t, l, base, owner) // a third run through the public API
		if le.Token() != g1.token || !le.AcquiredAt().Equal(g1.at) {
			t.Errorf("token %d acquired %v, want %d %v", le.Token(), le.AcquiredAt(), g1.token, g1.at)
		}
		if info, _ := l.Inspect(t.Context(), base); info.Counter != g1.token {
			t.Errorf("counter moved to %d", info.Counter)
		}
	})

	t.Run("another owner is held off", func(t *testing.T) {
		base := newBase(t, rdb)
		a, b := NewOwnerID("a"), NewOwnerID("b")
		le := mustAcquire(t, l, base, a)
		_, err := l.Acquire(t.Context(), base, b)
		var held *HeldError
		if !errors.As(err, &held) || !errors.Is(err, ErrHeld) {
			t.Fatalf("second acquire = %v, want HeldError", err)
		}
		if held.Owner != a || held.Token != le.Token() || held.Key != base || held.TTL <= 0 || held.TTL > ttl {
			t.Errorf("held = %+v", held)
		}
		ctx := t.Context()
		if ok, err := l.renew(ctx, base, b, le.Token()); ok || err != nil {
			t.Errorf("renew by other owner = %v, %v", ok, err)
		}
		if ok, err := l.release(ctx, base, b, le.Token()); ok || err != nil {
			t.Errorf("release by other owner = %v, %v", ok, err)
		}
		if ok, err := l.release(ctx, base, a, le.Token()+1); ok || err != nil {
			t.Errorf("release with another token = %v, %v", ok, err)
		}
		info, err := l.Inspect(ctx, base)
		if err != nil || !info.Held || info.Owner != a || info.Token != le.Token() || info.Counter != le.Token() {
			t.Errorf("after others' attempts: %+v, %v", info, err)
		}
		if !alive(le) {
			t.Error("holder lost its lease")
		}
	})

	t.Run("argument errors", func(t *testing.T) {
		if _, err := l.Acquire(t.Context(), "", "x"); err == nil {
			t.Error("empty base accepted")
		}
		if _, err := l.Acquire(t.Context(), newBase(t, rdb), ""); err == nil {
			t.Error("empty owner accepted")
		}
	})
}

func TestLocker_RaiseToken(t *testing.T) {
	t.Run("raises and never lowers", func(t *testing.T) {
		rdb := sharedClient(t)
		l := newLocker(t, rdb, Options{TTL: time.Second})
		base := newBase(t, rdb)
		if err := l.RaiseToken(t.Context(), base, 100); err != nil {
			t.Fatal(err)
		}
		if err := l.RaiseToken(t.Context(), base, 40); err != nil {
			t.Fatal(err)
		}
		if info, _ := l.Inspect(t.Context(), base); info.Counter != 100 {
			t.Fatalf("counter = %d, want 100", info.Counter)
		}
		le := mustAcquire(t, l, base, NewOwnerID("a"))
		if le.Token() != 101 {
			t.Errorf("token = %d, want 101", le.Token())
		}
		if err := l.RaiseToken(t.Context(), base, -1); err == nil {
			t.Error("negative value accepted")
		}
	})

	t.Run("after redis lost its data", func(t *testing.T) {
		srv := testsvc.StartRedis(t, false)
		rdb := newClient(t, srv.URL)
		l := newLocker(t, rdb, Options{TTL: time.Second})
		base := "migrate:{flush}"
		var last int64
		for range 3 {
			le := mustAcquire(t, l, base, NewOwnerID("a"))
			if le.Token() <= last {
				t.Fatalf("token %d after %d: not increasing", le.Token(), last)
			}
			last = le.Token()
			if err := le.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		held := mustAcquire(t, l, base, NewOwnerID("a"))
		last = held.Token()
		if err := rdb.FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		// The holder learns at its next renewal, or at its deadline at the latest.
		waitDone(t, held, time.Until(held.Deadline())+time.Second)
		if cause := context.Cause(held.Context()); cause != ErrLost {
			t.Errorf("holder's cause after FLUSHALL = %v", cause)
		}
		if info, _ := l.Inspect(t.Context(), base); info.Counter != 0 {
			t.Fatalf("counter after FLUSHALL = %d", info.Counter)
		}
		// The target's watermark says `last`: raise before taking the lease.
		if err := l.RaiseToken(t.Context(), base, last); err != nil {
			t.Fatal(err)
		}
		le := mustAcquire(t, l, base, NewOwnerID("b"))
		if le.Token() <= last {
			t.Errorf("token %d after FLUSHALL and raise to %d", le.Token(), last)
		}
	})
}
