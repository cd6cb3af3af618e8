package etcdlock

import (
	"context"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
)

// TestCluster_LeaderKilled: on a cluster of three members, a lease held
// through the cluster survives the leader's SIGKILL, its renewals going
// on through the other members; tokens granted after the leader change
// are above those before; a standby gets a dead holder's lease once it
// expired; the killed member comes back and serves the same data.
//
// What etcd (3.4, and later) does with leases on a leader change: only
// the leader times leases, and a follower keeps no expiry (lessor.Demote
// sets it to "forever"); a new leader, once it applied its first entry of
// the term, gives every lease its whole TTL again plus an election
// timeout (lessor.Promote(electionTimeout), from applyEntryNormal), as it
// cannot know when the old leader last renewed it. (With
// --experimental-enable-lease-checkpoint, off by default, it would
// restore a remaining TTL checkpointed every 5 minutes instead; nothing
// finer.) So a dead holder's lease outlives the old leader's death by at
// least its TTL, which this test asserts, and a standby waits up to an
// election, a TTL and an election timeout more than MaxWait says.
func TestCluster_LeaderKilled(t *testing.T) {
	t.Parallel()
	c := testsvc.StartEtcdCluster(t, 3)
	d := dsn(t, c.URL)
	const ttl = 3 * time.Second
	holder := newLocker(t, open(t, d), ttl)
	standby := newLocker(t, open(t, d), ttl)
	corpse := open(t, d)
	live, gone := "migrate:{cluster:live}", "migrate:{cluster:dead}"

	le := mustAcquire(t, holder, live, lock.NewOwnerID("holder"))
	// A holder that dies at once: granted, never renewed.
	dead := lock.NewOwnerID("dead")
	g, err := corpse.Acquire(t.Context(), gone, dead, ttl)
	if err != nil || g.Status != lock.Granted {
		t.Fatalf("dead holder's acquire = %+v, %v", g, err)
	}
	granted := time.Now()
	before := max(le.Token(), g.Token)

	leader := c.Leader()
	c.Kill(leader)
	killed := time.Now()
	if d := killed.Sub(granted); d > ttl/2 {
		t.Fatalf("the leader was killed %v after the dead holder's grant: its lease may have expired before", d)
	}
	if next := c.Leader(); next == leader {
		t.Fatalf("member %d still leads after it was killed", leader)
	}

	owner := lock.NewOwnerID("standby")
	if err := standby.WaitFree(t.Context(), gone, owner); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	t.Logf("the dead holder's lease freed %v after its grant, %v after the leader was killed", freed.Sub(granted), freed.Sub(killed))
	// The new leader gave the dead holder's lease its whole TTL again,
	// and an election timeout (500ms), after the kill.
	if took, least := freed.Sub(killed), ttl+500*time.Millisecond; took < least {
		t.Errorf("the dead holder's lease freed %v after the leader was killed, before its TTL and an election timeout %v", took, least)
	}
	// An election (at most two election timeouts), the TTL, the
	// extension of an election timeout and the expiry check, and plenty
	// for a loaded machine.
	if took, most := freed.Sub(killed), ttl+standby.MaxWait()+3*time.Second; took > most {
		t.Errorf("the dead holder's lease freed %v after the leader was killed, more than %v", took, most)
	}
	next := mustAcquire(t, standby, gone, owner)
	if p := next.Previous(); p.Owner != dead || p.Token != g.Token || p.Released {
		t.Errorf("previous = %+v, want %s token %d, not released", p, dead, g.Token)
	}
	if next.Token() <= before {
		t.Errorf("token %d after the leader change, not above %d before it", next.Token(), before)
	}

	// The holder renewed through the other members all along: its
	// deadline runs from a renewal sent after the kill.
	if le.Context().Err() != nil {
		t.Fatalf("the holder lost its lease: %v", context.Cause(le.Context()))
	}
	o := holder.Options()
	if validity := o.TTL - o.Drift - o.Margin; !le.Deadline().After(killed.Add(validity)) {
		t.Errorf("deadline %v after the kill: no renewal sent since succeeded", le.Deadline().Sub(killed))
	}

	// The killed member comes back with its data and serves the grants
	// made without it.
	c.Start(leader)
	back := open(t, dsn(t, "etcd://"+c.Addrs()[leader]+"/migrate"))
	info, err := back.Inspect(t.Context(), gone)
	if err != nil || !info.Held || info.Owner != owner || info.Token != next.Token() {
		t.Errorf("inspect through the restarted member = %+v, %v; want held by %s with token %d", info, err, owner, next.Token())
	}
	if err := le.Release(t.Context()); err != nil {
		t.Errorf("release after the leader change: %v", err)
	}
}
