package main_test

// End-to-end tests of the migrate binary: TestMain builds it once, each test
// drives it with os/exec against real PostgreSQL, MySQL/MariaDB and Redis
// (internal/testsvc), with its own source and target databases and a unique
// plan name (env, e2e_env_test.go), and checks the target by SQL rather than
// by migrate's own verification.

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-dev/migrate/internal/netfault"
	"github.com/migrate-dev/migrate/internal/testsvc"
)

// migrateBin is the binary built by TestMain.
var migrateBin string

func TestMain(m *testing.M) { os.Exit(buildAndRun(m)) }

// buildAndRun builds ./cmd/migrate into a temporary folder (with -race when
// MIGRATE_E2E_RACE is set) and runs the tests.
func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "migrate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	migrateBin = filepath.Join(dir, "migrate")
	args := []string{"build", "-o", migrateBin}
	if os.Getenv("MIGRATE_E2E_RACE") != "" {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/migrate")...)
	cmd.Dir = filepath.Join("..", "..") // the repository root, from cmd/migrate
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/migrate: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// processTimeout bounds every child process; a hang fails the test.
const processTimeout = 2 * time.Minute

// result is a finished migrate process.
type result struct {
	code           int // -1 when killed by a signal
	stdout, stderr string
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %v\n--- stdout\n%s--- stderr\n%s", r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
}

// proc is a running migrate process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr testsvc.Buffer
	start          time.Time
	done           chan struct{}
}

// startMigrate starts the binary with args; it is killed when the test ends.
func startMigrate(t *testing.T, args ...string) *proc {
	t.Helper()
	return startMigrateEnv(t, nil, args...)
}

// startMigrateEnv is startMigrate with env added to the child's
// environment (DSNs, which the command line would show in ps).
func startMigrateEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.CommandContext(t.Context(), migrateBin, args...)
	p.cmd.Env = append(childEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start migrate: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

// wait waits for the process to exit, at most processTimeout.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(processTimeout - time.Since(p.start)):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("migrate %v did not exit within %v\n%s", p.cmd.Args[1:], processTimeout, p.stderr.String())
	}
	return result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String(), elapsed: time.Since(p.start)}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t *testing.T) result {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("kill migrate: %v", err)
	}
	return p.wait(t)
}

// runMigrate runs the binary to completion.
func runMigrate(t *testing.T, args ...string) result {
	t.Helper()
	return startMigrate(t, args...).wait(t)
}

// childEnv is the test's environment without the MIGRATE_* fallbacks of the
// CLI, so a developer's shell cannot change what a test runs.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MIGRATE_PLAN", "MIGRATE_SOURCE", "MIGRATE_TARGET", "MIGRATE_REDIS", "MIGRATE_LOCK":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func wantCode(t *testing.T, r result, want int) {
	t.Helper()
	if r.code != want {
		t.Fatalf("want exit %d, got %s", want, r)
	}
}

func exec1(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func queryInt(t *testing.T, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func ident(parts ...string) string { return pgx.Identifier(parts).Sanitize() }

// poll calls fn until it returns true, failing after timeout.
func poll(t *testing.T, timeout time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxied starts a netfault.Proxy in front of the host:port of rawURL and
// returns it with rawURL rewritten to go through it; the proxy is closed
// when the test ends.
func proxied(t *testing.T, name, rawURL string) (*netfault.Proxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	px, err := netfault.NewProxy(name, u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	u.Host = px.Addr()
	return px, u.String()
}
