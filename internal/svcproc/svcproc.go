// Package svcproc runs private servers on 127.0.0.1 — redis-server, etcd,
// ZooKeeper — that can be killed (SIGKILL) and started again on the same
// port, with their data or without it: the lock services of the lock
// restart drill and of the tests that stop, restart or empty one under a
// run. Each kind has a constructor (Redis, Etcd, ZooKeeper) that builds
// its command line; starting, waiting for the port, killing and wiping
// are the same for all.
package svcproc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Server is one private server process.
type Server struct {
	Port int
	// Args are more options, after the kind's own; they apply from the
	// next Start.
	Args []string
	// Conf, if set, is a config file the kind reads first (Redis: the
	// first argument, as sentinels need one they can rewrite).
	Conf    string
	bin     string
	dir     string
	data    []string // what Wipe removes, relative to dir
	argv    func(s *Server) []string
	prepare func(*exec.Cmd)
	cmd     *exec.Cmd
	done    chan struct{}
	ready   func(context.Context) error // if set, what Start waits for once the port accepts (etcd and ZooKeeper accept before they serve)
	setup   func() error                // if set, run before each start (a ZooKeeper member's myid, which Wipe removes)
}

// Find returns the binary to run: bin if it names a file or a command on
// PATH, else the first of the paths given that exists; pkg names the
// Debian package that brings it, for the error.
func Find(bin, pkg string, paths ...string) (string, error) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (%q; install it, e.g. apt-get install %s)", filepath.Base(bin), bin, pkg)
}

// FreePort is a loopback port that was free a moment ago, for a server
// started next: one below the kernel's ephemeral range, where the
// system's own picks (a listener on port 0, every outgoing connection of
// every test running beside) never land, so that nothing takes it
// between this check and the server's bind (an etcd member of a test
// cluster exited on "address already in use" under a full suite).
func FreePort() (int, error) {
	lo, hi := portsBelowEphemeral()
	for range 100 {
		port := lo + rand.IntN(hi-lo)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken: another
		}
		_ = l.Close()
		return port, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portsBelowEphemeral is the range FreePort picks from: [10000, the
// ephemeral range's start), less the fixed ports of scripts/services.sh
// (22181 on), as far as the range allows.
func portsBelowEphemeral() (lo, hi int) {
	lo, hi = 10000, 22000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if start, err := strconv.Atoi(f[0]); err == nil && start < hi {
				hi = max(start, lo+1000)
			}
		}
	}
	return lo, hi
}

// newServer is a Server of bin on a free port with its data in dir.
func newServer(bin, dir string, prepare func(*exec.Cmd), argv func(*Server) []string, data ...string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return &Server{Port: port, bin: bin, dir: dir, prepare: prepare, argv: argv, data: data}, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Dir is the server's data folder.
func (s *Server) Dir() string { return s.dir }

// Running reports whether the process runs.
func (s *Server) Running() bool { return s.cmd != nil }

// Start starts the server (again, on the same port and data) unless it
// runs, and waits until it accepts connections.
func (s *Server) Start(ctx context.Context) error {
	if s.cmd != nil {
		return nil
	}
	if s.setup != nil {
		if err := s.setup(); err != nil {
			return fmt.Errorf("start %s: %w", filepath.Base(s.bin), err)
		}
	}
	s.cmd = exec.Command(s.bin, append(s.argv(s), s.Args...)...)
	s.cmd.Dir = s.dir
	if s.prepare != nil {
		s.prepare(s.cmd)
	}
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fmt.Errorf("start %s: %w", filepath.Base(s.bin), err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond); err == nil {
			_ = c.Close()
			if s.ready == nil {
				return nil
			}
			if err := s.ready(ctx); err != nil {
				s.Kill()
				return err
			}
			return nil
		}
		select {
		case <-s.done:
			s.cmd = nil
			return fmt.Errorf("%s on port %d exited at start; see its log in %s", filepath.Base(s.bin), s.Port, s.dir)
		case <-ctx.Done():
			s.Kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.Kill()
	return fmt.Errorf("%s did not accept connections on port %d within 60s", filepath.Base(s.bin), s.Port)
}

// Kill stops the server with SIGKILL (nothing saved at shutdown) and
// waits for it.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Pid is the process id of the running server; 0 when it does not run.
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Wipe removes the server's data, which it must not be running on: the
// next Start begins empty, as a replacement that lost everything would.
func (s *Server) Wipe() error {
	if s.cmd != nil {
		return errors.New("svcproc: wipe of a running server")
	}
	for _, d := range s.data {
		if err := os.RemoveAll(filepath.Join(s.dir, d)); err != nil {
			return err
		}
	}
	return nil
}
