package drill

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// redisServer is a private redis-server on 127.0.0.1 for the redis-restart
// drill, with or without persistence.
type redisServer struct {
	bin, dir string
	port     int
	persist  bool
	cmd      *exec.Cmd
	done     chan struct{}
}

// findRedisServer returns the redis-server to run: bin if it names a file
// or a command on PATH, else Debian's.
func findRedisServer(bin string) (string, error) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/sbin/redis-server"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("drill: redis-restart needs redis-server (%q not found; install it, e.g. apt-get install redis-server, or give --redis-server PATH)", bin)
}

// startRedis starts redis-server on a free port, its data in dir.
func startRedis(ctx context.Context, bin, dir string, persist bool) (*redisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &redisServer{bin: bin, dir: dir, port: port, persist: persist}
	return s, s.start(ctx)
}

// url is the server's redis:// URL.
func (s *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

func (s *redisServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// start starts the server (again, on the same port and data) and waits until
// it accepts connections.
func (s *redisServer) start(ctx context.Context) error {
	args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"), "--save", ""}
	if s.persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	s.cmd = exec.Command(s.bin, args...)
	setPdeathsig(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("drill: start redis-server: %w", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", s.addr(), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("drill: redis-server on port %d exited at start; see %s", s.port, filepath.Join(s.dir, "redis.log"))
		case <-ctx.Done():
			s.kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.kill()
	return errors.New("drill: redis-server did not accept connections within 20s")
}

// kill stops the server with SIGKILL (no shutdown save) and waits for it.
func (s *redisServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
