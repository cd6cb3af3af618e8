package testsvc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/svcproc"
)

// etcdStartTimeout bounds starting etcd members and waiting for a leader.
const etcdStartTimeout = 60 * time.Second

// EtcdServer is a private single-member etcd for one test, for faults the
// shared one must not suffer (a crash, a restart, the loss of its data).
type EtcdServer struct {
	t   testing.TB
	URL string // etcd://127.0.0.1:port/migrate, or etcds:// with TLS
	m   *svcproc.EtcdMember
}

// StartEtcd starts a private etcd on 127.0.0.1 and a free port, with the
// shared one's short heartbeat and election timeout. It is stopped when
// the test ends.
func StartEtcd(t testing.TB) *EtcdServer { return startEtcd(t, nil) }

// StartEtcdTLS is StartEtcd with TLS on the client port and c's server
// certificate; with clientCerts, clients must show a certificate that c's
// CA signed.
func StartEtcdTLS(t testing.TB, c *Certs, clientCerts bool) *EtcdServer {
	tls := &svcproc.EtcdTLS{CertFile: c.CertFile, KeyFile: c.KeyFile}
	if clientCerts {
		tls.CAFile = c.CAFile
	}
	return startEtcd(t, tls)
}

func startEtcd(t testing.TB, tls *svcproc.EtcdTLS) *EtcdServer {
	t.Helper()
	m, err := svcproc.Etcd(etcdBin(t), t.TempDir(), tls, etcdOutput(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Kill)
	s := &EtcdServer{t: t, URL: m.DSN("migrate"), m: m}
	s.Start()
	return s
}

// etcdBin is the etcd to run, installed by services.sh if need be.
func etcdBin(t testing.TB) string {
	t.Helper()
	EtcdURL(t) // makes sure etcd is installed
	bin, err := svcproc.FindEtcd("etcd")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// etcdOutput returns what sets up each etcd process of t: what it prints
// outside its log file (a bad flag, the warnings of its /health) goes to
// etcd.out in its folder.
func etcdOutput(t testing.TB) func(*exec.Cmd) {
	return func(c *exec.Cmd) {
		f, err := os.OpenFile(filepath.Join(c.Dir, "etcd.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Errorf("etcd output: %v", err)
			return
		}
		t.Cleanup(func() { _ = f.Close() })
		c.Stdout, c.Stderr = f, f
	}
}

// Addr is the server's host:port.
func (s *EtcdServer) Addr() string { return s.m.Addr() }

// Stop kills the server at once (SIGKILL) and waits for it.
func (s *EtcdServer) Stop() { s.m.Kill() }

// Start starts the server again on the same port and waits until it has
// elected itself and serves requests.
func (s *EtcdServer) Start() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), etcdStartTimeout)
	defer cancel()
	if err := s.m.Start(ctx); err != nil {
		s.t.Fatal(err)
	}
}

// Restart kills the server and starts it again with its data.
func (s *EtcdServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

// RestartWiped kills the server and starts it again on the same port with
// an empty data folder: a replacement cluster (a new cluster ID) that lost
// every key, lease and revision.
func (s *EtcdServer) RestartWiped() {
	s.t.Helper()
	s.Stop()
	if err := s.m.Wipe(); err != nil {
		s.t.Fatal(err)
	}
	s.Start()
}

// EtcdCluster is a private etcd cluster of several members for one test.
type EtcdCluster struct {
	t   testing.TB
	URL string // etcd://h1:p1,h2:p2,…/migrate
	c   *svcproc.EtcdCluster
}

// StartEtcdCluster starts an etcd cluster of n members on 127.0.0.1, each
// with its own client, peer and metrics ports and data folder, and waits
// until every member is healthy. It is stopped when the test ends.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	c, err := svcproc.NewEtcdCluster(etcdBin(t), dirs, nil, etcdOutput(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), etcdStartTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return &EtcdCluster{t: t, URL: c.URL("migrate"), c: c}
}

// Addrs are the members' client host:ports.
func (c *EtcdCluster) Addrs() []string { return c.c.Addrs() }

// Leader returns the index of the member that leads, waiting up to a
// minute for an election to end.
func (c *EtcdCluster) Leader() int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), etcdStartTimeout)
	defer cancel()
	i, err := c.c.Leader(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	return i
}

// Kill stops member i at once (SIGKILL) and waits for it.
func (c *EtcdCluster) Kill(i int) { c.c.Members[i].Kill() }

// Start starts member i again with its data and waits until it is healthy
// (back in the cluster, which needs a quorum).
func (c *EtcdCluster) Start(i int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), etcdStartTimeout)
	defer cancel()
	m := c.c.Members[i]
	if err := m.Start(ctx); err != nil {
		c.t.Fatal(err)
	}
	if err := m.Ready(ctx); err != nil {
		c.t.Fatal(err)
	}
}
