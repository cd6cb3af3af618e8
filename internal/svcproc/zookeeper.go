package svcproc

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ZooKeeperJar is the server's jar as Debian's zookeeper package installs
// it; the classpath adds the package's example configuration folder, as
// scripts/services.sh does.
const ZooKeeperJar = "/usr/share/java/zookeeper.jar"

const zkClasspath = ZooKeeperJar + ":/etc/zookeeper/conf_example"

// FindZooKeeper returns the java that runs ZooKeeper: bin if it names a
// file or a command on PATH, else Debian's. It fails when Debian's
// ZooKeeper jar is not installed.
func FindZooKeeper(bin string) (string, error) {
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return "", fmt.Errorf("zookeeper not found (%s; install it, e.g. apt-get install zookeeper)", ZooKeeperJar)
	}
	return Find(bin, "default-jre-headless", "/usr/bin/java")
}

// StartZooKeeper starts a standalone ZooKeeper with java on a free port of
// 127.0.0.1, its data in dir/data (which Wipe removes) and its zoo.cfg in
// dir. The defaults are those of scripts/services.sh — tickTime 100ms,
// maxSessionTimeout two minutes, no admin server — and conf lines
// ("maxSessionTimeout=3000") are added after them, so they override.
// prepare, if not nil, sets up each process before it starts. It returns
// once the server serves requests, as every Start of it does.
func StartZooKeeper(ctx context.Context, java, dir string, prepare func(*exec.Cmd), conf ...string) (*Server, error) {
	s, err := ZooKeeper(java, dir, prepare, conf...)
	if err != nil {
		return nil, err
	}
	return s, s.Start(ctx)
}

// zkReady waits until the ZooKeeper s serves requests, as its srvr command
// tells: a port that accepts connections is not enough, as a client that
// connects in the server's first moments may get no answer to its
// handshake for many seconds.
func zkReady(s *Server) func(context.Context) error {
	return func(ctx context.Context) error {
		deadline := time.Now().Add(60 * time.Second)
		for !zkServing(s.Addr()) {
			if time.Now().After(deadline) {
				return fmt.Errorf("zookeeper on port %d did not serve requests within 60s; see its log in %s", s.Port, s.dir)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		return nil
	}
}

// zkServing asks the ZooKeeper at addr for srvr: it serves once it tells
// its mode.
func zkServing(addr string) bool { return ZooKeeperMode(addr) != "" }

// ZooKeeperMode is the mode the ZooKeeper at addr tells in its srvr
// answer — "standalone", "leader" or "follower" — or "" when it does not
// serve requests (starting, or a member without a quorum) or does not
// answer.
func ZooKeeperMode(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(250 * time.Millisecond))
	if _, err := io.WriteString(c, "srvr"); err != nil {
		return ""
	}
	out, _ := io.ReadAll(c)
	for line := range strings.Lines(string(out)) {
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(mode)
		}
	}
	return ""
}

// ZooKeeper is StartZooKeeper without starting. Its settings are zoo.cfg
// lines, given here: Args and Conf are not used (QuorumPeerMain takes the
// config file as its only argument). It needs srvr among the four-letter
// words it allows (4lw.commands.whitelist), as the defaults have.
func ZooKeeper(java, dir string, prepare func(*exec.Cmd), conf ...string) (*Server, error) {
	s, err := newServer(java, dir, prepare, func(s *Server) []string {
		// A small heap and the client compiler: the server starts in about
		// half a second instead of three quarters.
		return []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-Xshare:auto",
			"-cp", zkClasspath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(s.dir, "zoo.cfg")}
	}, "data")
	if err != nil {
		return nil, err
	}
	s.ready = zkReady(s)
	lines := append([]string{
		"tickTime=100",
		"dataDir=" + filepath.Join(dir, "data"),
		"clientPort=" + strconv.Itoa(s.Port),
		"clientPortAddress=127.0.0.1",
		"maxSessionTimeout=120000",
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,ruok,cons,wchc,wchp",
	}, conf...)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("svcproc: zookeeper config: %w", err)
	}
	return s, nil
}

// ZooKeeperMember is ZooKeeper as server id of an ensemble: conf holds
// the ensemble's "server.N=127.0.0.1:quorum:election" lines (and its
// initLimit and syncLimit), and each Start writes id into data/myid
// first. A member serves requests, and so its Start returns, only once a
// quorum of the ensemble runs: start the members together.
func ZooKeeperMember(java, dir string, id int, prepare func(*exec.Cmd), conf ...string) (*Server, error) {
	s, err := ZooKeeper(java, dir, prepare, conf...)
	if err != nil {
		return nil, err
	}
	s.setup = func() error {
		data := filepath.Join(dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(id)+"\n"), 0o644)
	}
	return s, nil
}

// ZooKeeperURL is the zk:// URL of a ZooKeeper server, with prefix as its
// key prefix.
func ZooKeeperURL(s *Server, prefix string) string {
	return fmt.Sprintf("zk://127.0.0.1:%d/%s", s.Port, prefix)
}
