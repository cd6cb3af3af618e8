package testsvc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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
