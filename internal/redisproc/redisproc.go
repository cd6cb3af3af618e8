// Package redisproc runs a private redis-server on 127.0.0.1, with or
// without persistence, that can be killed and started again on the same
// port and data: the Redis of the redis-restart drill and of the tests that
// stop, restart or empty a Redis under a run.
package redisproc

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

// Server is one redis-server process.
type Server struct {
	Port int
	// Conf, if set, is a config file given first (sentinels need one they
	// can rewrite); Args are more options, after the defaults. Both apply
	// from the next Start.
	Conf    string
	Args    []string
	bin     string
	dir     string
	persist bool
	prepare func(*exec.Cmd)
	cmd     *exec.Cmd
	done    chan struct{}
}

// Find returns the redis-server to run: bin if it names a file or a command
// on PATH, else Debian's.
func Find(bin string) (string, error) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/sbin/redis-server"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("redis-server not found (%q; install it, e.g. apt-get install redis-server)", bin)
}

// Start starts bin on a free port with its data in dir; with persist, an
// append-only file fsynced at every write keeps the data across restarts.
// prepare, if not nil, sets up each process before it starts.
func Start(ctx context.Context, bin, dir string, persist bool, prepare func(*exec.Cmd)) (*Server, error) {
	s, err := New(bin, dir, persist, prepare)
	if err != nil {
		return nil, err
	}
	return s, s.Start(ctx)
}

// New is Start without starting: set Conf or Args first.
func New(bin, dir string, persist bool, prepare func(*exec.Cmd)) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return &Server{Port: port, bin: bin, dir: dir, persist: persist, prepare: prepare}, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Dir is the server's data folder.
func (s *Server) Dir() string { return s.dir }

// Start starts the server (again, on the same port and data) unless it runs,
// and waits until it accepts connections.
func (s *Server) Start(ctx context.Context) error {
	if s.cmd != nil {
		return nil
	}
	appendonly := "no"
	if s.persist {
		appendonly = "yes"
	}
	var args []string
	if s.Conf != "" {
		args = append(args, s.Conf)
	}
	args = append(args, "--bind", "127.0.0.1", "--port", strconv.Itoa(s.Port), "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"), "--save", "", "--appendonly", appendonly, "--appendfsync", "always")
	s.cmd = exec.Command(s.bin, append(args, s.Args...)...)
	if s.prepare != nil {
		s.prepare(s.cmd)
	}
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fmt.Errorf("start redis-server: %w", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-s.done:
			s.cmd = nil
			return fmt.Errorf("redis-server on port %d exited at start; see %s", s.Port, filepath.Join(s.dir, "redis.log"))
		case <-ctx.Done():
			s.Kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.Kill()
	return errors.New("redis-server did not accept connections within 20s")
}

// Kill stops the server with SIGKILL (no shutdown save) and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
