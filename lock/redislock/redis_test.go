package redislock

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/lock/locktest"
)

// What the conformance suite cannot say of every service: Redis's exact
// counter, its server clock, and tampering with the lease hash's fields.

// TestLease_Tampered: a lease hash whose owner or token someone else
// overwrote is lost at the next renewal and never renewed for the other.
func TestLease_Tampered(t *testing.T) {
	rdb := sharedClient(t)
	const ttl, every = 3 * time.Second, 100 * time.Millisecond
	for _, field := range []string{"owner", "token"} {
		t.Run(field, func(t *testing.T) {
			l := newLocker(t, rdb, lock.Options{TTL: ttl, RenewEvery: every})
			base := newBase(t, rdb)
			le := mustAcquire(t, l, base, lock.NewOwnerID("a"))
			if err := rdb.HSet(t.Context(), LeaseKey(base), field, "999").Err(); err != nil {
				t.Fatal(err)
			}
			locktest.WaitDone(t, le, time.Until(le.Deadline())+time.Second)
			if cause := context.Cause(le.Context()); cause != lock.ErrLost {
				t.Fatalf("cause = %v, want ErrLost", cause)
			}
			// Not renewed since: about TTL - RenewEvery left.
			if pttl := rdb.PTTL(t.Context(), LeaseKey(base)).Val(); pttl > ttl-every/2 {
				t.Errorf("someone else's lease was renewed: pttl %v", pttl)
			}
			got, err := rdb.HMGet(t.Context(), LeaseKey(base), "owner", "token").Result()
			if err != nil {
				t.Fatal(err)
			}
			if got[0] == le.Owner() && got[1] == strconv.FormatInt(le.Token(), 10) {
				t.Error("lease key taken back")
			}
			if err := le.Release(t.Context()); !errors.Is(err, lock.ErrNotOwner) {
				t.Errorf("release = %v, want ErrNotOwner", err)
			}
		})
	}
}

// TestBackend_Counter: tokens are the counter's next value; a retried
// acquire does not move it; a raise sets it to exactly the watermark.
func TestBackend_Counter(t *testing.T) {
	rdb := sharedClient(t)
	b := New(unclosed{rdb}, "redis", nil)
	base := newBase(t, rdb)
	ctx := t.Context()
	owner := lock.NewOwnerID("a")
	g1, err := b.Acquire(ctx, base, owner, time.Second)
	if err != nil || g1.Status != lock.Granted || g1.Token != 1 {
		t.Fatalf("acquire = %+v, %v", g1, err)
	}
	g2, err := b.Acquire(ctx, base, owner, time.Second)
	if err != nil || g2.Status != lock.Retried || g2.Token != 1 || !g2.At.Equal(g1.At) {
		t.Fatalf("retry = %+v, %v", g2, err)
	}
	if n, err := b.Counter(ctx, base); err != nil || n != 1 {
		t.Fatalf("counter after a retry = %d, %v", n, err)
	}
	if ok, err := b.Release(ctx, base, owner, 1); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
	for _, v := range []int64{100, 40} {
		if err := b.Raise(ctx, base, v); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := b.Counter(ctx, base); n != 100 {
		t.Fatalf("counter = %d, want 100", n)
	}
	g3, err := b.Acquire(ctx, base, lock.NewOwnerID("b"), time.Second)
	if err != nil || g3.Token != 101 {
		t.Errorf("grant after a raise to 100 = %+v, %v; want token 101", g3, err)
	}
}

// TestBackend_WaitByServerClock: the wait of a takeover is measured on the
// Redis server's clock, between the dead holder's grant and the next.
func TestBackend_WaitByServerClock(t *testing.T) {
	rdb := sharedClient(t)
	const ttl = 400 * time.Millisecond
	b := New(unclosed{rdb}, "redis", nil)
	base := newBase(t, rdb)
	g, err := b.Acquire(t.Context(), base, lock.NewOwnerID("dead"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFree(t.Context(), base, "", ttl/10); err != nil {
		t.Fatal(err)
	}
	g2, err := b.Acquire(t.Context(), base, lock.NewOwnerID("b"), ttl)
	if err != nil || g2.Status != lock.Granted {
		t.Fatal(g2, err)
	}
	if !g2.Prev.RenewedAt.Equal(g.At) || g2.Wait != g2.At.Sub(g.At) || g2.Wait < ttl {
		t.Errorf("previous renewed at %v, wait %v; want %v and the %v between the grants", g2.Prev.RenewedAt, g2.Wait, g.At, g2.At.Sub(g.At))
	}
}

// TestBackend_WaitFreeOnTime: a standby polling a dead holder's lease is
// told it is free within milliseconds of its expiry, not a poll later: a
// PTTL of 0 is the key's last millisecond, not a key without expiry (which
// once cost a whole poll about every other takeover). The polls are long
// (500ms) so that one wasted shows.
func TestBackend_WaitFreeOnTime(t *testing.T) {
	rdb := sharedClient(t)
	b := New(unclosed{rdb}, "redis", nil)
	const ttl, poll = time.Second, 500 * time.Millisecond
	for i := range 4 {
		base := newBase(t, rdb)
		g, err := b.Acquire(t.Context(), base, lock.NewOwnerID("dead"), ttl)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i) * 111 * time.Millisecond) // the polls fall elsewhere each time
		if err := b.WaitFree(t.Context(), base, "", poll); err != nil {
			t.Fatal(err)
		}
		g2, err := b.Acquire(t.Context(), base, lock.NewOwnerID("b"), ttl)
		if err != nil || g2.Status != lock.Granted {
			t.Fatal(g2, err)
		}
		if w := g2.At.Sub(g.At); w > ttl+poll/2 {
			t.Errorf("granted %v after the dead holder's grant (TTL %v): the standby was told a poll late", w, ttl)
		}
	}
}
