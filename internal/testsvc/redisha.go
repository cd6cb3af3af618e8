package testsvc

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/internal/svcproc"
)

// startRedisNode starts one private redis-server with more options (args),
// and a config file first when conf is not "" (written into its folder).
func startRedisNode(t testing.TB, conf string, args ...string) *svcproc.Server {
	t.Helper()
	RedisURL(t) // makes sure redis-server is installed
	bin, err := svcproc.FindRedis("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := svcproc.Redis(bin, t.TempDir(), false, func(c *exec.Cmd) { c.Stdout, c.Stderr = os.Stderr, os.Stderr })
	if err != nil {
		t.Fatal(err)
	}
	if conf != "" {
		srv.Conf = filepath.Join(srv.Dir(), "redis.conf")
		if err := os.WriteFile(srv.Conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv.Args = args
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	return srv
}

// FreePort is a loopback port free a moment ago, for a server started
// next (svcproc.FreePort).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := svcproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// waitFor polls cond every 50ms for up to 30s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("redis: %s: not within 30s", what)
}

// RedisCluster is a private Redis Cluster of primaries only.
type RedisCluster struct {
	URL   string // redis+cluster://… naming every node
	Nodes []*svcproc.Server
}

// StartRedisCluster starts a Redis Cluster of n primaries on 127.0.0.1, the
// 16384 slots split evenly, and waits until every node reports it ok.
func StartRedisCluster(t testing.TB, n int) *RedisCluster {
	t.Helper()
	rc := startCluster(t, n, nil, func(args ...string) *svcproc.Server { return startRedisNode(t, "", args...) })
	rc.URL = "redis+cluster://" + rc.URL
	return rc
}

// startCluster starts n nodes with start, given the cluster options, splits
// the slots among them, has them meet and waits until each is ok, talking
// to them with tlsConf (nil: plain). URL is set to "host:port?addr=…&addr=…"
// for the caller to put a scheme before.
func startCluster(t testing.TB, n int, tlsConf *tls.Config, start func(args ...string) *svcproc.Server) *RedisCluster {
	t.Helper()
	ctx := context.Background()
	rc := &RedisCluster{}
	var addrs []string
	var bus []int // cluster bus ports, chosen: port+10000 may be out of range
	for range n {
		bus = append(bus, FreePort(t))
		rc.Nodes = append(rc.Nodes, start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(bus[len(bus)-1])))
		addrs = append(addrs, rc.Nodes[len(rc.Nodes)-1].Addr())
	}
	client := func(addr string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tlsConf})
	}
	for i, node := range rc.Nodes {
		c := client(node.Addr())
		err := c.ClusterAddSlotsRange(ctx, 16384*i/n, 16384*(i+1)/n-1).Err()
		if err == nil && i > 0 {
			err = c.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", rc.Nodes[0].Port, bus[0]).Err()
		}
		_ = c.Close()
		if err != nil {
			t.Fatalf("redis cluster node %s: %v", node.Addr(), err)
		}
	}
	for _, node := range rc.Nodes {
		c := client(node.Addr())
		waitFor(t, node.Addr()+" cluster_state:ok", func() bool {
			info, err := c.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n))
		})
		_ = c.Close()
	}
	rc.URL = addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	return rc
}

// RedisSentinel is a primary, its replica and one sentinel watching them
// (quorum 1) under the name "main".
type RedisSentinel struct {
	t        testing.TB
	URL      string // redis+sentinel://… of the sentinel
	Primary  *svcproc.Server
	Replica  *svcproc.Server
	Sentinel *svcproc.Server
}

// StartRedisSentinel starts the three and waits until the sentinel knows the
// replica and the replica is in sync.
func StartRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	rs := &RedisSentinel{t: t}
	rs.Primary = startRedisNode(t, "")
	rs.Replica = startRedisNode(t, "", "--replicaof", "127.0.0.1", strconv.Itoa(rs.Primary.Port))
	rs.Sentinel = startRedisNode(t, fmt.Sprintf(`sentinel monitor main 127.0.0.1 %d 1
sentinel down-after-milliseconds main 1000
sentinel failover-timeout main 5000
`, rs.Primary.Port), "--sentinel")
	rs.URL = fmt.Sprintf("redis+sentinel://%s/0?master_name=main", rs.Sentinel.Addr())
	s := rs.sentinel()
	defer s.Close()
	rep := redis.NewClient(&redis.Options{Addr: rs.Replica.Addr()})
	defer rep.Close()
	waitFor(t, "replica in sync and known to the sentinel", func() bool {
		info, err := rep.Info(context.Background(), "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return false
		}
		reps, err := s.Replicas(context.Background(), "main").Result()
		return err == nil && len(reps) == 1 && !strings.Contains(reps[0]["flags"], "down")
	})
	return rs
}

func (rs *RedisSentinel) sentinel() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: rs.Sentinel.Addr()})
}

// PrimaryAddr returns the address the sentinel names as primary.
func (rs *RedisSentinel) PrimaryAddr() string {
	rs.t.Helper()
	s := rs.sentinel()
	defer s.Close()
	a, err := s.GetMasterAddrByName(context.Background(), "main").Result()
	if err != nil {
		rs.t.Fatal(err)
	}
	return net.JoinHostPort(a[0], a[1])
}

// Failover makes the sentinel promote the replica (SENTINEL FAILOVER) and
// waits until it names the replica as primary.
func (rs *RedisSentinel) Failover() {
	rs.t.Helper()
	s := rs.sentinel()
	defer s.Close()
	if err := s.Failover(context.Background(), "main").Err(); err != nil {
		rs.t.Fatalf("sentinel failover: %v", err)
	}
	waitFor(rs.t, "the replica promoted", func() bool { return rs.PrimaryAddr() == rs.Replica.Addr() })
}

// StartRedisWithPassword starts a private redis-server that requires
// password (requirepass, in its config file: not on its command line) and
// returns its redis://:password@127.0.0.1:port/0 URL, the password
// percent-encoded. It is stopped when the test ends.
func StartRedisWithPassword(t testing.TB, password string) string {
	t.Helper()
	var quoted strings.Builder
	for _, b := range []byte(password) { // every byte as \xHH: any password fits
		fmt.Fprintf(&quoted, `\x%02x`, b)
	}
	srv := startRedisNode(t, "requirepass \""+quoted.String()+"\"\n")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: password})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis with a password on %s: %v", srv.Addr(), err)
	}
	return (&url.URL{Scheme: "redis", User: url.UserPassword("", password), Host: srv.Addr(), Path: "/0"}).String()
}
