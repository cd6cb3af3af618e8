package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
)

func dial(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	rdb, err := Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// leaseCycle runs what a shard's lease goes through on rdb: grant, refusal
// of a second owner, standby inspection, release, the next grant with a
// larger token, a raise and a forget. Every script touches several keys of
// one lease, which a cluster refuses (CROSSSLOT) unless they share a slot.
func leaseCycle(t *testing.T, l *lock.Locker, base string) {
	t.Helper()
	ctx := t.Context()
	a := mustAcquire(t, l, base, lock.NewOwnerID("a"))
	if _, err := l.Acquire(ctx, base, lock.NewOwnerID("b")); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("%s: second owner got %v, want lock.ErrHeld", base, err)
	}
	if info, err := l.Inspect(ctx, base); err != nil || !info.Held || info.Owner != a.Owner() {
		t.Fatalf("%s: inspect = %+v, %v", base, info, err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("%s: release: %v", base, err)
	}
	b := mustAcquire(t, l, base, lock.NewOwnerID("b"))
	if b.Token() != a.Token()+1 || b.Previous().Owner != a.Owner() {
		t.Fatalf("%s: next grant token %d previous %+v, want %d after %s", base, b.Token(), b.Previous(), a.Token()+1, a.Owner())
	}
	if err := l.RaiseToken(ctx, base, b.Token()+10); err != nil {
		t.Fatalf("%s: raise token: %v", base, err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("%s: release: %v", base, err)
	}
	if err := l.Forget(ctx, base); err != nil {
		t.Fatalf("%s: forget: %v", base, err)
	}
}

// TestDial_Cluster: leases of many shards spread over the nodes of a real
// Redis Cluster and each works whole, on whichever node owns its slot.
func TestDial_Cluster(t *testing.T) {
	t.Parallel()
	clusterSpread(t, testsvc.StartRedisCluster(t, 3).URL, "public.orders")
}

// clusterSpread runs a lease cycle for 12 shards of table through the
// cluster at url and checks that their leases landed on all 3 nodes.
func clusterSpread(t *testing.T, url, table string) {
	t.Helper()
	rdb := dial(t, url)
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("%s gave a %T, want a cluster client", url, rdb)
	}
	l := newLocker(t, rdb, lock.Options{TTL: 2 * time.Second})
	nodes := map[string]bool{}
	for i := range 12 {
		base := fmt.Sprintf("migrate:{plan:%s:%d}", table, i)
		leaseCycle(t, l, base)
		node, err := cc.MasterForKey(t.Context(), LeaseKey(base))
		if err != nil {
			t.Fatal(err)
		}
		nodes[node.Options().Addr] = true
	}
	if len(nodes) != 3 {
		t.Errorf("12 shards' leases landed on %d of 3 nodes: %v", len(nodes), nodes)
	}
}

// TestDial_Sentinel: a client through Sentinel follows a failover; the
// lease, replicated before it, stays its holder's and keeps renewing on the
// promoted replica, and a second owner is still refused.
func TestDial_Sentinel(t *testing.T) {
	t.Parallel()
	rs := testsvc.StartRedisSentinel(t)
	rdb := dial(t, rs.URL)
	const ttl = 5 * time.Second
	l := newLocker(t, rdb, lock.Options{TTL: ttl})
	leaseCycle(t, l, "migrate:{plan:t:0}")

	base := "migrate:{plan:t:1}"
	le := mustAcquire(t, l, base, lock.NewOwnerID("a"))
	if n, err := rdb.Do(t.Context(), "WAIT", 1, 1000).Int(); err != nil || n != 1 { // the replica has the lease
		t.Fatalf("WAIT = %d, %v", n, err)
	}
	rs.Failover()
	if got := rs.PrimaryAddr(); got != rs.Replica.Addr() {
		t.Fatalf("primary %s after failover, want the replica %s", got, rs.Replica.Addr())
	}
	failedOver := time.Now()
	// A renewal sent after the failover moves the deadline past this; the
	// lease would be lost first if none reached the new primary.
	o := l.Options()
	for !le.Deadline().After(failedOver.Add(o.TTL - o.Drift - o.Margin)) {
		select {
		case <-le.Done():
			t.Fatalf("lease lost after the failover (%v): not renewed on the new primary", context.Cause(le.Context()))
		case <-time.After(10 * time.Millisecond):
		}
	}
	var held *lock.HeldError
	if _, err := l.Acquire(t.Context(), base, lock.NewOwnerID("b")); !errors.As(err, &held) || held.Owner != le.Owner() || held.Token != le.Token() {
		t.Fatalf("second owner after failover: %v, want held by %s token %d", err, le.Owner(), le.Token())
	}
}

// TestDial_URLs: schemes pick the client; bad URLs say why without the
// password.
func TestDial_URLs(t *testing.T) {
	for url, want := range map[string]string{
		"redis://127.0.0.1:1/0": "*redis.Client",
		"redis+sentinel://127.0.0.1:1/0?master_name=m&addr=127.0.0.1:2": "*redis.Client",
		"redis+cluster://127.0.0.1:1?addr=127.0.0.1:2":                  "*redis.ClusterClient",
	} {
		rdb, err := Dial(url)
		if err != nil {
			t.Errorf("%s: %v", url, err)
			continue
		}
		if got := fmt.Sprintf("%T", rdb); got != want {
			t.Errorf("%s: %s, want %s", url, got, want)
		}
		_ = rdb.Close()
	}
	for url, want := range map[string]string{
		"redis+sentinel://:s3cret@127.0.0.1:1/0":           "master_name",
		"redis+cluster://:s3cret@127.0.0.1:1?bogus=s3cret": "unexpected option",
		"redis+ring://:s3cret@127.0.0.1:1":                 "scheme must be",
		"redis://:s3cret@127.0.0.1:1/0":                    "",
		// net/url's errors quote the whole URL (and here a piece of the
		// password as a port).
		"redis://:s3cret/x@127.0.0.1:1/0": "invalid port",
		"redis://:s3cret x@127.0.0.1:1/0": "invalid userinfo",
	} {
		rdb, err := Dial(url)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", url, err)
			} else {
				_ = rdb.Close()
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error %v, want one saying %q without the password", url, err, want)
		}
	}
}
