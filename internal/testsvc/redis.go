package testsvc

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/migrate-dev/migrate/internal/redisproc"
)

// RedisServer is a private redis-server process for one test, for faults the
// shared server must not suffer (stop, restart, data loss).
type RedisServer struct {
	t   testing.TB
	URL string
	srv *redisproc.Server
}

// StartRedis starts a private redis-server on 127.0.0.1 and a free port. With
// persist, it keeps an append-only file so a restart keeps its data. It is
// stopped when the test ends.
func StartRedis(t testing.TB, persist bool) *RedisServer {
	t.Helper()
	RedisURL(t) // makes sure redis-server is installed
	bin, err := redisproc.Find("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redisproc.Start(context.Background(), bin, t.TempDir(), persist, func(c *exec.Cmd) { c.Stdout, c.Stderr = os.Stderr, os.Stderr })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	return &RedisServer{t: t, URL: srv.URL(), srv: srv}
}

// Start starts the server again and waits until it accepts connections.
func (s *RedisServer) Start() {
	s.t.Helper()
	if err := s.srv.Start(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// Stop kills the server at once (SIGKILL: no shutdown save) and waits for it.
func (s *RedisServer) Stop() { s.srv.Kill() }

// Restart stops the server and starts it again on the same port.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}
