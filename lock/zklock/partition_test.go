package zklock

import (
	"context"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
)

// TestRenew_PartitionedFollower: the holder's client reaches only a
// follower of a 3-server ensemble, and that follower is cut off from the
// leader and the other follower. The leader expires the holder's session
// one session timeout later and a standby on the leader gets the lease,
// while the follower, which notices the lost leader only after syncLimit
// (20s here), still answers reads from its stale state: the holder's node
// is there, this session's. No renewal sent after the cut may extend the
// holder's local deadline — it reads only after a sync with the leader,
// which the cut follower cannot get. Read alone, the follower renewed the
// lease until it dropped its clients (measured: the deadline 1.5s after
// the standby's grant, the lease lost 11.6s after the cut with a 10s
// syncLimit).
func TestRenew_PartitionedFollower(t *testing.T) {
	t.Parallel()
	ens := testsvc.StartZooKeeperEnsemble(t, 3, "syncLimit=200")
	leader := ens.Leader()
	follower := ens.Members[(leader+1)%3]
	ttl, base := 2*time.Second, "migrate:{partition}"
	hb := dial(t, follower.URL("migrate"), ttl, nil)
	holder := locker(t, hb, ttl)
	sb := dial(t, ens.Members[leader].URL("migrate"), ttl, nil)
	p := sb.paths(base)
	le, err := holder.Acquire(t.Context(), base, "holder")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sb.WaitFree(t.Context(), base, "standby", ttl/10) }()
	waitQueued(t, rawConn(t, ens.Members[leader].Addr(), nil), p, 2)
	stale := rawConn(t, follower.Addr(), nil) // its session is made before the cut: reads need no leader
	holderNode := p.node(queued(t, stale, p)[0])

	ens.Isolate((leader + 1) % 3)
	cut := time.Now()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the standby still waits")
	}
	g, err := sb.Acquire(t.Context(), base, "standby", ttl)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	if g.Status != lock.Granted || g.Token <= le.Token() {
		t.Fatalf("standby: %+v, want granted above the holder's token %d", g, le.Token())
	}
	defer func() { _, _ = sb.Release(context.WithoutCancel(t.Context()), base, "standby", g.Token) }()
	// The cut follower still answers, from before the holder's session
	// expired: what a renewal reading it alone would believe.
	ok, stat, err := stale.Exists(holderNode)
	if err != nil || !ok || stat.EphemeralOwner != sessionOf(t, hb) {
		t.Fatalf("the cut follower does not answer from stale state (exists %v, %v): the partition did not happen as planned", ok, err)
	}
	t.Logf("standby granted %v after the cut; the holder's deadline is %v after that grant", granted.Sub(cut), le.Deadline().Sub(granted))
	o := holder.Options()
	if limit := cut.Add(o.TTL - o.Drift - o.Margin); le.Deadline().After(limit) {
		t.Errorf("a renewal sent after the cut extended the holder's deadline by %v, to %v after the standby's grant", le.Deadline().Sub(limit), le.Deadline().Sub(granted))
	}
	select {
	case <-le.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the holder still trusts its lease")
	}
	t.Logf("holder lost its lease %v after the cut", time.Since(cut))
}
