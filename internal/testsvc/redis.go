package testsvc

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/migrate-dev/migrate/internal/svcproc"
)

// RedisServer is a private redis-server process for one test, for faults the
// shared server must not suffer (stop, restart, data loss).
type RedisServer struct {
	t   testing.TB
	URL string
	srv *svcproc.Server
}

// StartRedis starts a private redis-server on 127.0.0.1 and a free port. With
// persist, it keeps an append-only file so a restart keeps its data. It is
// stopped when the test ends.
func StartRedis(t testing.TB, persist bool) *RedisServer {
	t.Helper()
	RedisURL(t) // makes sure redis-server is installed
	bin, err := svcproc.FindRedis("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := svcproc.StartRedis(context.Background(), bin, t.TempDir(), persist, func(c *exec.Cmd) { c.Stdout, c.Stderr = os.Stderr, os.Stderr })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	return &RedisServer{t: t, URL: svcproc.RedisURL(srv), srv: srv}
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

// Addr is the server's host:port.
func (s *RedisServer) Addr() string { return s.srv.Addr() }

// RestartWiped stops the server at once and starts it again with none of
// its data, as a replacement that lost it would.
func (s *RedisServer) RestartWiped() {
	s.t.Helper()
	s.Stop()
	if err := s.srv.Wipe(); err != nil {
		s.t.Fatal(err)
	}
	s.Start()
}
