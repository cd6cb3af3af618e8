package zklock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/migrate-dev/migrate/internal/netfault"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
)

// TestWaitFree_NoHerd: three standbys queue behind a holder, each
// watching only the node before its own — the server's own list of
// watches says so. When the holder dies, only the first is woken and
// gets the lease; the others get it one after the other as each one
// before them releases, each with a token above the one before.
func TestWaitFree_NoHerd(t *testing.T) {
	t.Parallel()
	zs := testsvc.StartZooKeeper(t)
	// A long TTL: the place WaitFree leaves is kept for Acquire for
	// one session timeout, however slow the machine.
	url, ttl, base := zs.URL("migrate"), 5*time.Second, "migrate:{herd}"
	raw := rawConn(t, zs.Addr(), nil)
	holder := dial(t, url, ttl, nil)
	p := holder.paths(base)
	le, err := locker(t, holder, ttl).Acquire(t.Context(), base, "holder")
	if err != nil {
		t.Fatal(err)
	}
	var standbys [3]*Backend
	var waits [3]chan error
	t.Cleanup(func() { // the waits end with the test's context
		for _, w := range waits {
			if w != nil {
				<-w
			}
		}
	})
	for i := range standbys {
		standbys[i] = dial(t, url, ttl, nil)
		waits[i] = make(chan error, 1)
		go func() { waits[i] <- standbys[i].WaitFree(t.Context(), base, owner(i), ttl/10) }()
		waitQueued(t, raw, p, i+2) // in line in this order
	}
	nodes := queued(t, raw, p)
	want := map[string]int64{}
	for i, sb := range standbys {
		want[p.node(nodes[i])] = sessionOf(t, sb)
	}
	waitWatches(t, zs.Addr(), want)

	if err := holder.Close(); err != nil { // it dies: its session ends, its node goes
		t.Fatal(err)
	}
	prev := lock.Grant{Owner: le.Owner(), Token: le.Token()}
	for i, sb := range standbys {
		select {
		case err := <-waits[i]:
			waits[i] <- err // for the cleanup
			if err != nil {
				t.Fatalf("standby %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("standby %d still waits", i)
		}
		// A request answered after the change comes after its watch
		// event: the counts below are final for it.
		for _, other := range standbys[i:] {
			if err := other.Ping(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		for j, other := range standbys {
			if got, want := wakes(other), min(1, max(0, i-j+1)); got != want {
				t.Errorf("after standby %d's turn, standby %d was woken %d times, want %d", i, j, got, want)
			}
		}
		g, err := sb.Acquire(t.Context(), base, owner(i), ttl)
		if err != nil || g.Status != lock.Granted {
			t.Fatalf("standby %d's acquire = %+v, %v", i, g, err)
		}
		if g.Token <= prev.Token || g.Prev.Owner != prev.Owner || g.Prev.Token != prev.Token || g.Prev.Released != (i > 0) {
			t.Errorf("standby %d's grant %+v after %+v", i, g, prev)
		}
		if ok, err := sb.Release(t.Context(), base, owner(i), g.Token); !ok || err != nil {
			t.Fatalf("standby %d's release = %v, %v", i, ok, err)
		}
		prev = g
	}
}

func owner(i int) string { return fmt.Sprintf("standby-%d", i) }

func sessionOf(t *testing.T, b *Backend) int64 {
	t.Helper()
	s, err := b.current()
	if err != nil {
		t.Fatal(err)
	}
	return s.id()
}

func wakes(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.wakes)
}

// waitWatches waits until the server's watches (its wchp command) are
// exactly want: each path watched by one session.
func waitWatches(t *testing.T, addr string, want map[string]int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := watches(t, addr)
		ok := len(got) == len(want)
		for path, id := range want {
			ok = ok && len(got[path]) == 1 && got[path][0] == id
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("watches %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watches asks the ZooKeeper at addr which sessions watch which paths.
func watches(t *testing.T, addr string) map[string][]int64 {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "wchp"); err != nil {
		t.Fatal(err)
	}
	got := map[string][]int64{}
	var path string
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "0x"); ok && line != strings.TrimSpace(line) {
			var n int64
			if _, err := fmt.Sscanf(id, "%x", &n); err != nil {
				t.Fatalf("wchp line %q: %v", line, err)
			}
			got[path] = append(got[path], n)
		} else if strings.HasPrefix(line, "/") {
			path = line
		}
	}
	return got
}

// TestLease_SessionExpiry: a holder cut off from the service loses its
// lease by its local deadline; the standby is told the lease is free only
// when the server expired the holder's session — after that deadline,
// within MaxWait of the cut — and gets it with a higher token.
func TestLease_SessionExpiry(t *testing.T) {
	t.Parallel()
	dsn := parse(t, testsvc.ZooKeeperURL(t))
	ttl, base := time.Second, "migrate:{"+testsvc.Prefix(t)+"}"
	px, err := netfault.NewProxy("zk", dsn.Hosts()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	holder := locker(t, dial(t, "zk://"+px.Addr()+"/"+dsn.Database(), ttl, nil), ttl)
	sb := dial(t, testsvc.ZooKeeperURL(t), ttl, nil)
	forget(t, sb, base)
	standby := locker(t, sb, ttl)
	le, err := holder.Acquire(t.Context(), base, "holder")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- standby.WaitFree(t.Context(), base, "standby") }()
	raw := rawConn(t, dsn.Hosts()[0], nil)
	waitQueued(t, raw, sb.paths(base), 2)

	if err := px.Cut(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	var freed time.Time
	select {
	case err := <-waited:
		freed = time.Now()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the standby still waits")
	}
	select {
	case <-le.Done():
	default:
		t.Fatalf("the standby was told the lease is free while the holder still trusts it (deadline in %v)", time.Until(le.Deadline()))
	}
	if cause := context.Cause(le.Context()); !errors.Is(cause, lock.ErrLost) {
		t.Errorf("holder's cause = %v, want ErrLost", cause)
	}
	if !freed.After(le.Deadline()) {
		t.Errorf("free %v before the holder's deadline", le.Deadline().Sub(freed))
	}
	if limit := standby.MaxWait() + 300*time.Millisecond; freed.Sub(cut) > limit {
		t.Errorf("free %v after the cut, more than MaxWait %v and slack", freed.Sub(cut), standby.MaxWait())
	}
	next, err := standby.Acquire(t.Context(), base, "standby")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = next.Release(context.WithoutCancel(t.Context())) }()
	if next.Token() <= le.Token() {
		t.Errorf("token %d after the holder's %d", next.Token(), le.Token())
	}
	if p := next.Previous(); p.Owner != "holder" || p.Token != le.Token() || p.Released {
		t.Errorf("previous = %+v", p)
	}
	if w := next.Wait(); w < ttl {
		t.Errorf("wait %v, below the session timeout %v", w, ttl)
	}
}

// TestDial_NegotiatedTimeout: a TTL above the server's maxSessionTimeout
// is refused — a lease trusted longer than its session would be unsafe;
// one below its minSessionTimeout works, with a warning, and standbys wait
// the longer session timeout. The server's minSessionTimeout is 2s, not
// its default of two ticks (200ms): a session that short can expire on a
// loaded machine, and its requests fail with it.
func TestDial_NegotiatedTimeout(t *testing.T) {
	t.Parallel()
	zs := testsvc.StartZooKeeper(t, "minSessionTimeout=2000", "maxSessionTimeout=3000")
	url := zs.URL("migrate")

	var logs testsvc.Buffer
	b, err := Dial(parse(t, url), 4*time.Second, debugLogger(&logs))
	if err == nil {
		_ = b.Close()
		t.Fatal("a TTL above maxSessionTimeout was accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "3s, below the lease TTL 4s") || !strings.Contains(msg, "maxSessionTimeout") {
		t.Errorf("error %q", msg)
	}

	ttl := time.Second
	b = dial(t, url, ttl, debugLogger(&logs))
	if !strings.Contains(logs.String(), "session timeout above the lease TTL") || !strings.Contains(logs.String(), "session_timeout=2s") {
		t.Errorf("no warning:\n%s", logs.String())
	}
	if got := b.MaxWait(ttl, ttl/10); got != 2200*time.Millisecond {
		t.Errorf("MaxWait = %v, want the 2s session's plus a tenth", got)
	}
	// A lease of 1s, on a session of 2s: granted, and gone once not
	// renewed for its TTL, as the process deletes its node.
	base := "migrate:{short}"
	g, err := b.Acquire(t.Context(), base, "a", ttl)
	if err != nil || g.Status != lock.Granted || g.Token <= 0 {
		t.Fatalf("acquire = %+v, %v", g, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := b.Inspect(t.Context(), base)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Held && info.Last.Owner == "a" && info.Last.Token == g.Token {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inspect = %+v, long after the TTL", info)
		}
	}
	if ok, err := b.Renew(t.Context(), base, "a", g.Token, ttl); ok || err != nil {
		t.Errorf("renew after the TTL = %v, %v", ok, err)
	}
	g, err = b.Acquire(t.Context(), base, "b", ttl)
	if err != nil || g.Status != lock.Granted {
		t.Fatalf("acquire = %+v, %v", g, err)
	}
}

// TestDial_Auth: with a user in the DSN the nodes are the identity's:
// others may read them, but neither another password nor no password
// may change them, and no error, log line or name holds a password.
func TestDial_Auth(t *testing.T) {
	t.Parallel()
	dsn := parse(t, testsvc.ZooKeeperURL(t))
	addr, prefix := dsn.Hosts()[0], dsn.Database()+"/"+testsvc.Prefix(t)
	const pw, wrong = "alice-pw-5ecret", "mallory-pw-gue55"
	ttl, base := time.Second, "migrate:{auth}"
	var logs testsvc.Buffer
	alice := dial(t, "zk://alice:"+pw+"@"+addr+"/"+prefix, ttl, debugLogger(&logs))
	raw := rawConn(t, addr, []byte("alice:"+pw))
	t.Cleanup(func() { // the identity's nodes, which only it may delete
		_ = alice.Forget(context.WithoutCancel(t.Context()), base)
		_ = raw.Delete("/"+prefix, -1)
	})
	le, err := locker(t, alice, ttl).Acquire(t.Context(), base, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = le.Release(context.WithoutCancel(t.Context())) }()

	for _, url := range []string{"zk://alice:" + wrong + "@" + addr + "/" + prefix, "zk://" + addr + "/" + prefix} {
		other := dial(t, url, ttl, debugLogger(&logs))
		if _, err := other.Acquire(t.Context(), base, "other", ttl); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s acquired: %v", other, err)
		} else if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), pw) {
			t.Errorf("the error holds a password: %v", err)
		}
		if err := other.Raise(t.Context(), base, 1<<40); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s raised the token: %v", other, err)
		}
		if info, err := other.Inspect(t.Context(), base); err != nil || !info.Held || info.Owner != "alice" || info.Token != le.Token() {
			t.Errorf("%s inspects %+v, %v", other, info, err)
		}
		if strings.Contains(other.String(), wrong) {
			t.Errorf("name %q", other)
		}
	}
	if strings.Contains(alice.String(), pw) {
		t.Errorf("name %q", alice)
	}
	if out := logs.String(); strings.Contains(out, pw) || strings.Contains(out, wrong) || !strings.Contains(out, "authenticated") {
		t.Errorf("the logs hold a password, or no debug line of the client:\n%s", out)
	}
}

// TestSession_AfterDataLoss: a server that lost its data refuses the
// clients that saw its old transactions. The holder loses its lease; the
// backend replaces its session after a session timeout of refusals, and
// its later grants, once raised above the old tokens, work.
func TestSession_AfterDataLoss(t *testing.T) {
	t.Parallel()
	zs := testsvc.StartZooKeeper(t)
	ttl, base := time.Second, "migrate:{lost}"
	b := dial(t, zs.URL("migrate"), ttl, nil)
	l := locker(t, b, ttl)
	le, err := l.Acquire(t.Context(), base, "a")
	if err != nil {
		t.Fatal(err)
	}
	old := sessionOf(t, b)
	zs.RestartWiped()
	select {
	case <-le.Done():
	case <-time.After(ttl + time.Second):
		t.Fatal("the holder still trusts its lease")
	}
	if cause := context.Cause(le.Context()); !errors.Is(cause, lock.ErrLost) {
		t.Errorf("cause = %v", cause)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := l.RaiseToken(t.Context(), base, le.Token())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new session: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if id := sessionOf(t, b); id == old || id == 0 {
		t.Errorf("session %x after %x", id, old)
	}
	if err := l.WaitFree(t.Context(), base, "b"); err != nil {
		t.Fatal(err)
	}
	next, err := l.Acquire(t.Context(), base, "b")
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= le.Token() {
		t.Errorf("token %d after %d", next.Token(), le.Token())
	}
	if err := next.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestAcquire_NodeBeingDeleted: a lease this process gave up — its entry
// expired here, its node's delete still being retried in the background
// (a connection blip) — is not granted again to the same owner: that node
// would vanish under the new grant and hand the lease to a standby while
// this holder trusts it. The owner gets a new node and a larger token.
func TestAcquire_NodeBeingDeleted(t *testing.T) {
	const ttl = 2 * time.Second
	dsn := parse(t, testsvc.ZooKeeperURL(t))
	b := dial(t, dsn.Redacted(), ttl, nil)
	base := "migrate:{" + testsvc.Prefix(t) + "}"
	forget(t, b, base)
	first, err := b.Acquire(t.Context(), base, "a", ttl)
	if err != nil || first.Status != lock.Granted {
		t.Fatalf("first grant = %+v, %v", first, err)
	}
	// What expire leaves when its delete failed: no entry, the node's
	// path being deleted.
	k := key{base, "a"}
	e := b.entryOf(k)
	if e == nil || !b.drop(k, e) {
		t.Fatal("no entry for the grant")
	}
	b.mu.Lock()
	b.deleting[b.paths(base).node(e.node)] = true
	b.mu.Unlock()
	again, err := b.Acquire(t.Context(), base, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != lock.Granted || again.Token <= first.Token {
		t.Errorf("acquire after the lease was given up = %+v, want a new grant above token %d", again, first.Token)
	}
	if e2 := b.entryOf(k); e2 == nil || e2.node == e.node {
		t.Errorf("the new grant's node = %+v, want another than %s", e2, e.node)
	}
}
