package testsvc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/netfault"
	"github.com/migrate-dev/migrate/internal/svcproc"
)

// ZooKeeperServer is a private ZooKeeper server for one test, for faults the
// shared server must not suffer (a restart, with or without its data) and
// settings it does not have (another maxSessionTimeout).
type ZooKeeperServer struct {
	t   testing.TB
	srv *svcproc.Server
}

// StartZooKeeper starts a private standalone ZooKeeper on 127.0.0.1 and a
// free port, with the settings of scripts/services.sh (tickTime 100ms) and
// conf lines of zoo.cfg after them ("maxSessionTimeout=3000"). Its
// transaction log is written before each reply, so a restart keeps every
// node unless wiped. Its output goes to zookeeper.log in its folder. It is
// stopped when the test ends.
func StartZooKeeper(t testing.TB, conf ...string) *ZooKeeperServer {
	t.Helper()
	ZooKeeperURL(t) // makes sure ZooKeeper is installed
	bin, err := svcproc.FindZooKeeper("java")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
	srv, err := svcproc.StartZooKeeper(context.Background(), bin, dir, func(c *exec.Cmd) { c.Stdout, c.Stderr = out, out }, conf...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	return &ZooKeeperServer{t: t, srv: srv}
}

// Addr is the server's host:port.
func (s *ZooKeeperServer) Addr() string { return s.srv.Addr() }

// URL is the server's zk:// URL with key prefix prefix.
func (s *ZooKeeperServer) URL(prefix string) string { return svcproc.ZooKeeperURL(s.srv, prefix) }

// Start starts the server again and waits until it serves requests.
func (s *ZooKeeperServer) Start() {
	s.t.Helper()
	if err := s.srv.Start(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// Stop kills the server at once (SIGKILL) and waits for it.
func (s *ZooKeeperServer) Stop() { s.srv.Kill() }

// Restart stops the server at once and starts it again on the same port
// with its data: its sessions come back with it, each given its timeout
// afresh.
func (s *ZooKeeperServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

// RestartWiped stops the server at once and starts it again with none of
// its data, as a replacement that lost it would: it knows no node and no
// session, and its transaction ids start over.
func (s *ZooKeeperServer) RestartWiped() {
	s.t.Helper()
	s.Stop()
	if err := s.srv.Wipe(); err != nil {
		s.t.Fatal(err)
	}
	s.Start()
}

// ZooKeeperEnsemble is a private ensemble of ZooKeeper servers for one
// test, whose members can be cut off from each other: each member reaches
// each other one's quorum port — the leader's link to its followers, over
// which every write, commit and session touch goes — through a proxy of
// its own (internal/netfault), so that Isolate can cut one member from
// the others while its clients still reach it. The election ports are
// reached directly (ZooKeeper connects back to the address a peer
// announces, which is its own): an isolated member may learn who leads,
// but cannot follow it.
type ZooKeeperEnsemble struct {
	t       testing.TB
	Members []*ZooKeeperServer
	links   map[[2]int]*netfault.Proxy // {from, to}: member from's way to member to's quorum port
}

// StartZooKeeperEnsemble starts an ensemble of n private ZooKeeper servers
// on 127.0.0.1 (ids 1 to n, Members[0] to Members[n-1]) with the settings
// of StartZooKeeper, initLimit 50 and syncLimit 20 ticks, and conf lines
// after them ("syncLimit=100"), and waits until each serves requests. It
// is stopped when the test ends.
func StartZooKeeperEnsemble(t testing.TB, n int, conf ...string) *ZooKeeperEnsemble {
	t.Helper()
	ZooKeeperURL(t) // makes sure ZooKeeper is installed
	bin, err := svcproc.FindZooKeeper("java")
	if err != nil {
		t.Fatal(err)
	}
	quorum, election := make([]int, n), make([]int, n)
	for i := range n {
		if quorum[i], err = svcproc.FreePort(); err != nil {
			t.Fatal(err)
		}
		if election[i], err = svcproc.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	e := &ZooKeeperEnsemble{t: t, links: map[[2]int]*netfault.Proxy{}}
	for from := range n {
		for to := range n {
			if from == to {
				continue
			}
			p, err := netfault.NewProxy(fmt.Sprintf("zk%d-zk%d", from+1, to+1), fmt.Sprintf("127.0.0.1:%d", quorum[to]))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			e.links[[2]int{from, to}] = p
		}
	}
	for i := range n {
		lines := []string{"initLimit=50", "syncLimit=20"}
		for j := range n {
			q := fmt.Sprintf("127.0.0.1:%d", quorum[j])
			if j != i {
				q = e.links[[2]int{i, j}].Addr()
			}
			lines = append(lines, fmt.Sprintf("server.%d=%s:%d", j+1, q, election[j]))
		}
		dir := t.TempDir()
		out, err := os.Create(filepath.Join(dir, "zookeeper.log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = out.Close() })
		srv, err := svcproc.ZooKeeperMember(bin, dir, i+1, func(c *exec.Cmd) { c.Stdout, c.Stderr = out, out }, append(lines, conf...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Kill)
		e.Members = append(e.Members, &ZooKeeperServer{t: t, srv: srv})
	}
	// A member serves only once a quorum runs: start them together.
	errs := make(chan error, n)
	for _, m := range e.Members {
		go func() { errs <- m.srv.Start(context.Background()) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// Leader is the index in Members of the ensemble's leader, once every
// member serves as the leader or a follower of it (at most a minute).
func (e *ZooKeeperEnsemble) Leader() int {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		leader, followers := -1, 0
		for i, m := range e.Members {
			switch svcproc.ZooKeeperMode(m.Addr()) {
			case "leader":
				leader = i
			case "follower":
				followers++
			}
		}
		if leader >= 0 && followers == len(e.Members)-1 {
			return leader
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("zookeeper ensemble: no leader with %d followers within a minute", len(e.Members)-1)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Isolate cuts member i off from the others, as a partition would: its
// quorum links to and from them drop everything, without closing; its
// clients still reach it.
func (e *ZooKeeperEnsemble) Isolate(i int) {
	e.t.Helper()
	e.eachLink(i, (*netfault.Proxy).Cut)
}

// Rejoin ends an Isolate of member i.
func (e *ZooKeeperEnsemble) Rejoin(i int) {
	e.t.Helper()
	e.eachLink(i, (*netfault.Proxy).Heal)
}

func (e *ZooKeeperEnsemble) eachLink(i int, f func(*netfault.Proxy) error) {
	e.t.Helper()
	for k, p := range e.links {
		if k[0] == i || k[1] == i {
			if err := f(p); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}
