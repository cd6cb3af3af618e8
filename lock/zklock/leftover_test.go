package zklock

import (
	"encoding/json"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
)

// lostCreate makes in b's session the queue node that a create for owner
// leaves when the server carries it out but the connection drops before
// its reply (go-zookeeper: "zk: connection closed"), and returns its
// name: a node no caller of b knows of. This is how a standby hung in
// the lock-restart drill on ZooKeeper: its place's create failed so while
// the server restarted, it queued again behind that node, and watched its
// own leftover for ever.
func lostCreate(t *testing.T, b *Backend, p paths, owner string) string {
	t.Helper()
	v, _ := json.Marshal(queueData{Owner: owner, TimeoutMs: b.timeout().Milliseconds()})
	path, err := b.s.conn.Create(p.node("n-"+url.PathEscape(owner)+"-"), v, zk.FlagEphemeralSequential, b.acl)
	if err != nil {
		t.Fatal(err)
	}
	return path[len(p.queue)+1:]
}

// leftoverTest is a lease held by "holder" on one backend, renewed until
// released, and another backend b for the owner "standby", both with a
// session of leftoverTTL.
type leftoverTest struct {
	b    *Backend
	base string
	p    paths
	le   *lock.Lease
	addr string // the ZooKeeper server's
}

const leftoverTTL = 2 * time.Second

func held(t *testing.T) leftoverTest {
	dsn := parse(t, testsvc.ZooKeeperURL(t))
	url := dsn.Redacted()
	h, b := dial(t, url, leftoverTTL, nil), dial(t, url, leftoverTTL, nil)
	base := "migrate:{" + testsvc.Prefix(t) + "}"
	forget(t, h, base)
	le, err := locker(t, h, leftoverTTL).Acquire(t.Context(), base, "holder")
	if err != nil {
		t.Fatal(err)
	}
	return leftoverTest{b: b, base: base, p: h.paths(base), le: le, addr: dsn.Hosts()[0]}
}

// TestWaitFree_LostCreateReply: a standby whose earlier create's reply
// was lost deletes that leftover node, and is let through when the
// holder releases, instead of waiting behind its own node until its
// session ends. Without the fix it still waits 10s after the release.
func TestWaitFree_LostCreateReply(t *testing.T) {
	t.Parallel()
	lt := held(t)
	b, base, p, le := lt.b, lt.base, lt.p, lt.le
	left := lostCreate(t, b, p, "standby")
	waited := make(chan error, 1)
	go func() { waited <- b.WaitFree(t.Context(), base, "standby", 200*time.Millisecond) }()
	c := rawConn(t, lt.addr, nil)
	// The holder's node and the standby's new place, the leftover gone
	// (the queue holds two nodes from the start: the holder's and the
	// leftover).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		kids := queued(t, c, p)
		if len(kids) == 2 && !slices.Contains(kids, left) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %v: want the holder's node and the standby's new place, the leftover %s gone", kids, left)
		}
	}
	if err := le.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the standby still waits 10s after the release; queue %v", queued(t, c, p))
	}
	next, err := b.Acquire(t.Context(), base, "standby", leftoverTTL)
	if err != nil || next.Status != lock.Granted || next.Token <= le.Token() {
		t.Fatalf("standby's grant = %+v, %v; want one above token %d", next, err, le.Token())
	}
	if kids := queued(t, c, p); len(kids) != 1 {
		t.Errorf("queue %v, want only the standby's node", kids)
	}
}

// TestAcquire_LostCreateReply: an acquire told that the lease is held
// deletes its owner's leftover nodes too, and no one else's — not even
// those of an owner whose name starts with its own.
func TestAcquire_LostCreateReply(t *testing.T) {
	t.Parallel()
	lt := held(t)
	b, base, p, le := lt.b, lt.base, lt.p, lt.le
	other := lostCreate(t, b, p, "standby-1") // "n-standby-1-…": not owner standby's
	left := lostCreate(t, b, p, "standby")
	held, err := b.Acquire(t.Context(), base, "standby", leftoverTTL)
	if err != nil || held.Status != lock.Held || held.Owner != "holder" || held.Token != le.Token() {
		t.Fatalf("acquire = %+v, %v; want held by holder, token %d", held, err, le.Token())
	}
	c := rawConn(t, lt.addr, nil)
	kids := waitQueued(t, c, p, 2)
	if slices.Contains(kids, left) || !slices.Contains(kids, other) {
		t.Errorf("queue %v: want the leftover %s gone and %s kept", kids, left, other)
	}
}
