package svcproc

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FindEtcd returns the etcd to run: bin if it names a file or a command on
// PATH, else Debian's.
func FindEtcd(bin string) (string, error) {
	return Find(bin, "etcd-server", "/usr/bin/etcd")
}

// EtcdTLS is the TLS of an etcd's client port: the server's certificate
// and key, and, when CAFile is set, client certificates required and
// verified against that CA.
type EtcdTLS struct {
	CertFile, KeyFile string
	CAFile            string
}

// EtcdMember is one member of a private etcd cluster on 127.0.0.1. Its
// clients connect on Port; its peers and its metrics (/health, /metrics,
// plain HTTP even when the client port has TLS) have ports of their own.
type EtcdMember struct {
	*Server
	Name        string
	PeerPort    int
	MetricsPort int
	tls         bool
}

// EtcdCluster is a private etcd of one or more members. Every member
// heartbeats every 50ms and calls an election after 500ms, as the shared
// one of scripts/services.sh does, so leases may be as short as one
// second (etcd's minimum is 1.5 election timeouts, rounded up to a
// second) and a lost leader is replaced within about a second.
type EtcdCluster struct {
	Members []*EtcdMember
	token   string // --initial-cluster-token: a new one after a wipe
}

// etcdData is a member's data folder, relative to its folder.
const etcdData = "etcd.data"

// Etcd is a single-member etcd on a free port with its data in dir, not
// started; its Start waits until it has elected itself and serves
// requests. Its Wipe makes the next Start bootstrap a new cluster (a new
// cluster ID), as a replacement that lost everything would. tls, if not
// nil, puts TLS on the client port; prepare, if not nil, sets up each
// process before it starts.
func Etcd(bin, dir string, tls *EtcdTLS, prepare func(*exec.Cmd)) (*EtcdMember, error) {
	c, err := NewEtcdCluster(bin, []string{dir}, tls, prepare)
	if err != nil {
		return nil, err
	}
	m := c.Members[0]
	m.ready = m.Ready
	return m, nil
}

// StartEtcd starts a single-member etcd (Etcd) and waits until it serves
// requests.
func StartEtcd(ctx context.Context, bin, dir string, tls *EtcdTLS, prepare func(*exec.Cmd)) (*EtcdMember, error) {
	m, err := Etcd(bin, dir, tls, prepare)
	if err != nil {
		return nil, err
	}
	return m, m.Start(ctx)
}

// NewEtcdCluster returns an etcd cluster of len(dirs) members, none
// started, the data of member i in dirs[i]. tls, if not nil, puts TLS on
// every client port. prepare, if not nil, sets up each process before it
// starts.
func NewEtcdCluster(bin string, dirs []string, tls *EtcdTLS, prepare func(*exec.Cmd)) (*EtcdCluster, error) {
	if len(dirs) == 0 {
		return nil, errors.New("svcproc: an etcd cluster needs at least one member")
	}
	c := &EtcdCluster{token: newToken()}
	for i, dir := range dirs {
		peer, err := FreePort()
		if err != nil {
			return nil, err
		}
		metrics, err := FreePort()
		if err != nil {
			return nil, err
		}
		m := &EtcdMember{Name: "m" + strconv.Itoa(i), PeerPort: peer, MetricsPort: metrics, tls: tls != nil}
		m.Server, err = newServer(bin, dir, prepare, func(s *Server) []string { return c.argv(m, s, tls) }, etcdData)
		if err != nil {
			return nil, err
		}
		c.Members = append(c.Members, m)
	}
	return c, nil
}

// argv is the command line of member m.
func (c *EtcdCluster) argv(m *EtcdMember, s *Server, tls *EtcdTLS) []string {
	data := filepath.Join(s.dir, etcdData)
	if _, err := os.Stat(data); err != nil && len(c.Members) == 1 {
		// No data: this start bootstraps a cluster. A member alone may
		// be a new one each time (a wiped member); members of several
		// bootstrap together, and only EtcdCluster.Wipe renews theirs.
		c.token = newToken()
	}
	var initial []string
	for _, o := range c.Members {
		initial = append(initial, o.Name+"="+o.peerURL())
	}
	args := []string{
		"--name", m.Name, "--data-dir", data,
		"--listen-client-urls", m.URL(), "--advertise-client-urls", m.URL(),
		"--listen-peer-urls", m.peerURL(), "--initial-advertise-peer-urls", m.peerURL(),
		"--listen-metrics-urls", "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.MetricsPort)),
		"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
		"--initial-cluster-token", c.token,
		"--heartbeat-interval", "50", "--election-timeout", "500",
		"--logger", "zap", "--log-outputs", filepath.Join(s.dir, "etcd.log"),
	}
	if tls != nil {
		args = append(args, "--cert-file", tls.CertFile, "--key-file", tls.KeyFile)
		if tls.CAFile != "" {
			args = append(args, "--client-cert-auth", "--trusted-ca-file", tls.CAFile)
		}
	}
	return args
}

// DSN is the member's etcd:// URL (etcds:// with TLS) with the key prefix
// prefix, as a plan names a lock service.
func (m *EtcdMember) DSN(prefix string) string {
	scheme := "etcd"
	if m.tls {
		scheme = "etcds"
	}
	return scheme + "://" + m.Addr() + "/" + prefix
}

// URL is the member's client URL: http://127.0.0.1:port, or https://.
func (m *EtcdMember) URL() string {
	scheme := "http"
	if m.tls {
		scheme = "https"
	}
	return scheme + "://" + m.Addr()
}

func (m *EtcdMember) peerURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.PeerPort))
}

// metrics is the body of path on the member's metrics port.
func (m *EtcdMember) metrics(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.MetricsPort)) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Close = true // no idle connection, nor its goroutines, outlives the call
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		sb.WriteString(sc.Text())
		sb.WriteByte('\n')
	}
	return sb.String(), sc.Err()
}

// Healthy reports whether the member answers /health with true: it has a
// leader and a quorum read went through.
func (m *EtcdMember) Healthy(ctx context.Context) bool {
	body, err := m.metrics(ctx, "/health")
	return err == nil && strings.Contains(body, `"health":"true"`)
}

// IsLeader reports whether the member says it is the leader
// (etcd_server_is_leader in its metrics).
func (m *EtcdMember) IsLeader(ctx context.Context) bool {
	body, err := m.metrics(ctx, "/metrics")
	return err == nil && strings.Contains(body, "\netcd_server_is_leader 1\n")
}

// Ready waits until the member is healthy or ctx ends. A member accepts
// connections before it has a leader, so Start's wait for the port is not
// enough.
func (m *EtcdMember) Ready(ctx context.Context) error {
	for !m.Healthy(ctx) {
		if m.cmd == nil {
			return fmt.Errorf("etcd member %s does not run", m.Name)
		}
		select {
		case <-m.done:
			return fmt.Errorf("etcd member %s on port %d exited; the end of its log (%s):\n%s", m.Name, m.Port, m.Dir(), logTail(filepath.Join(m.Dir(), "etcd.log"), 2048))
		case <-ctx.Done():
			return fmt.Errorf("etcd member %s on port %d not healthy: %w; see its log in %s", m.Name, m.Port, ctx.Err(), m.Dir())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Start starts every member that does not run and waits until each is
// healthy (a quorum must run for that).
func (c *EtcdCluster) Start(ctx context.Context) error {
	for _, m := range c.Members {
		if err := m.Server.Start(ctx); err != nil {
			c.Kill()
			return err
		}
	}
	for _, m := range c.Members {
		if err := m.Ready(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Kill stops every member with SIGKILL and waits for them.
func (c *EtcdCluster) Kill() {
	for _, m := range c.Members {
		m.Kill()
	}
}

// Wipe removes every member's data; no member may run. The next Start
// bootstraps a new cluster under a new cluster token, so with a new
// cluster ID: a replacement that lost every key, lease and revision.
func (c *EtcdCluster) Wipe() error {
	for _, m := range c.Members {
		if err := m.Wipe(); err != nil {
			return err
		}
	}
	c.token = newToken()
	return nil
}

// Addrs are the members' client host:ports.
func (c *EtcdCluster) Addrs() []string {
	var addrs []string
	for _, m := range c.Members {
		addrs = append(addrs, m.Addr())
	}
	return addrs
}

// URL is the cluster's etcd:// (etcds:// with TLS) URL naming every
// member, with the key prefix prefix.
func (c *EtcdCluster) URL(prefix string) string {
	scheme := "etcd"
	if c.Members[0].tls {
		scheme = "etcds"
	}
	return scheme + "://" + strings.Join(c.Addrs(), ",") + "/" + prefix
}

// Leader waits until exactly one running member says it is the leader
// and returns its index, or ctx's error.
func (c *EtcdCluster) Leader(ctx context.Context) (int, error) {
	for {
		leader, n := -1, 0
		for i, m := range c.Members {
			if m.Running() && m.IsLeader(ctx) {
				leader, n = i, n+1
			}
		}
		if n == 1 {
			return leader, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("etcd: no single leader among %d members: %w", len(c.Members), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// newToken is a cluster token nobody used before: etcd derives the
// cluster and member IDs from it and the peer URLs.
func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "svcproc-" + hex.EncodeToString(b[:])
}

// logTail is the last n bytes of a log file, for an error (the test's
// folder holding it is gone once the test ends).
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
