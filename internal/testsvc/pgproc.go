package testsvc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PostgresServer is a private PostgreSQL server for one test, for faults
// the shared server must not suffer: a crash and restart.
type PostgresServer struct {
	t    testing.TB
	dir  string
	port int
	URL  string // its database "migrate", as the superuser scripts/services.sh creates
}

// StartPostgres starts a private PostgreSQL server through
// scripts/services.sh (its own folder and a free port on 127.0.0.1); it is
// stopped and removed when the test ends.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	PostgresURL(t)                              // the packages are installed
	dir, err := os.MkdirTemp("", "migrate-pg-") // not t.TempDir: the postgres user must reach it
	if err != nil {
		t.Fatal(err)
	}
	s := &PostgresServer{t: t, dir: dir, port: FreePort(t)}
	t.Cleanup(func() {
		_ = s.services("stop").Run()
		_ = os.RemoveAll(dir)
	})
	s.Start()
	s.URL = fmt.Sprintf("postgres://migrate:pg-local-pw@127.0.0.1:%d/migrate?sslmode=disable", s.port)
	return s
}

func (s *PostgresServer) services(args ...string) *exec.Cmd {
	cmd := exec.Command("bash", append([]string{filepath.Join(RepoRoot(s.t), "scripts", "services.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "MIGRATE_SVC_DIR="+s.dir, "MIGRATE_PG_PORT="+strconv.Itoa(s.port))
	return cmd
}

// Start starts the server (again) and waits until it accepts connections.
func (s *PostgresServer) Start() {
	s.t.Helper()
	if out, err := s.services("start", "pg").CombinedOutput(); err != nil {
		s.t.Fatalf("private postgres: %v\n%s", err, out)
	}
}

// Crash kills the postmaster and every process it started with SIGKILL,
// as a crash of the machine would, and waits until they are gone and the
// port is closed; Start then runs crash recovery.
func (s *PostgresServer) Crash() {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "pg", "postmaster.pid"))
	if err != nil {
		s.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		s.t.Fatal(err)
	}
	out, _ := exec.Command("pgrep", "-P", strconv.Itoa(pid)).Output()
	pids := append(strings.Fields(string(out)), strconv.Itoa(pid))
	for _, p := range pids {
		if n, err := strconv.Atoi(p); err == nil {
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	// Gone, not only dead: PostgreSQL refuses to start while its lock
	// file names a process that exists, and a zombie does until init
	// reaps it (a second or two on these machines).
	waitFor(s.t, "postgres to die and be reaped", func() bool {
		for _, p := range pids {
			if _, err := os.Stat("/proc/" + p); err == nil {
				return false
			}
		}
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return false
		}
		return true
	})
}
