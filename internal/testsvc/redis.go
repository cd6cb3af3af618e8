package testsvc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// RedisServer is a private redis-server process for one test, for faults the
// shared server must not suffer (stop, restart, data loss).
type RedisServer struct {
	t       testing.TB
	Port    int
	URL     string
	dir     string
	persist bool
	cmd     *exec.Cmd
}

// StartRedis starts a private redis-server on 127.0.0.1 and a free port. With
// persist, it keeps an append-only file so a restart keeps its data. It is
// stopped when the test ends.
func StartRedis(t testing.TB, persist bool) *RedisServer {
	t.Helper()
	RedisURL(t) // makes sure redis-server is installed
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &RedisServer{t: t, Port: port, URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port), dir: t.TempDir(), persist: persist}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server (again) and waits until it accepts connections.
func (s *RedisServer) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	appendonly := "no"
	if s.persist {
		appendonly = "yes"
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		bin = "/usr/bin/redis-server"
	}
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(s.Port),
		"--dir", s.dir, "--save", "", "--appendonly", appendonly, "--appendfsync", "always",
		"--logfile", filepath.Join(s.dir, "redis.log"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("redis-server on port %d did not start; log in %s", s.Port, s.dir)
}

// Stop kills the server at once (SIGKILL: no shutdown save) and waits for it.
func (s *RedisServer) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart stops the server and starts it again on the same port.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}
