package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Engine is a server kind, as the directions name it.
type Engine string

// The engines.
const (
	PG Engine = "pg"
	MY Engine = "my"
)

// Ends are the source and target engines of direction d ("pg-my").
func Ends(d string) (src, dst Engine) {
	s, t, _ := strings.Cut(d, "-")
	return Engine(s), Engine(t)
}

// runTool runs cmd and waits for it; its error carries the end of the
// tool's stderr (unless cmd.Stderr was set).
func runTool(cmd *exec.Cmd) error {
	var errb bytes.Buffer
	if cmd.Stderr == nil {
		cmd.Stderr = &errb
	}
	if err := cmd.Run(); err != nil {
		return toolError(cmd, err, errb.String())
	}
	return nil
}

func toolError(cmd *exec.Cmd, err error, stderr string) error {
	msg := lastLine(stderr)
	if msg == "" {
		return fmt.Errorf("%s: %w", filepath.Base(cmd.Path), err)
	}
	return fmt.Errorf("%s: %w: %s", filepath.Base(cmd.Path), err, msg)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// lastLineOf is the last non-empty line of a file ("" when unreadable).
func lastLineOf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return lastLine(string(b))
}

// exitCode is the exit status in err of a finished command (-1: none).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// timeBin is GNU time, which measures the peak RSS of the processes the
// bench measures. (The kernel's ru_maxrss of a child of this Go process
// would start at this process's own peak: Go starts children with
// CLONE_VM, and exec records the shared memory's high-water mark.)
const timeBin = "/usr/bin/time"

// underTime is name with args run under GNU time, which writes its peak
// RSS (KiB) to rssFile. It runs in a process group of its own, which a
// cancelled ctx ends (SIGTERM, then SIGKILL of time after 10 s): time
// itself ignores SIGINT and SIGQUIT while it waits.
func underTime(ctx context.Context, rssFile, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, timeBin, append([]string{"-f", "%M", "-o", rssFile, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// readRSS is the peak RSS GNU time wrote to rssFile (its last line; 0 when
// there is none).
func readRSS(rssFile string) int64 {
	n, err := strconv.ParseInt(lastLineOf(rssFile), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// pipe runs from | to, both to the end; the error is the first end's that
// failed.
func pipe(from, to *exec.Cmd) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	var e1, e2 bytes.Buffer
	from.Stdout, from.Stderr = w, &e1
	to.Stdin, to.Stderr = r, &e2
	if err := from.Start(); err != nil {
		_, _ = r.Close(), w.Close()
		return err
	}
	err = to.Start()
	_, _ = r.Close(), w.Close()
	if err != nil {
		_ = from.Process.Kill()
		_ = from.Wait()
		return err
	}
	errFrom, errTo := from.Wait(), to.Wait()
	if errFrom != nil {
		return toolError(from, errFrom, e1.String())
	}
	if errTo != nil {
		return toolError(to, errTo, e2.String())
	}
	return nil
}

// seconds is the time since t0, in seconds.
func seconds(t0 time.Time) float64 { return time.Since(t0).Seconds() }

// needPackage installs a Debian package with apt-get when command is not
// on PATH (the bench runs as root, like scripts/services.sh).
func (b *Bench) needPackage(ctx context.Context, command, pkg string) error {
	if _, err := exec.LookPath(command); err == nil {
		return nil
	}
	b.logf("installing %s with apt-get", pkg)
	if !b.aptUpdated {
		if err := runTool(exec.CommandContext(ctx, "apt-get", "update", "-qq")); err != nil {
			return err
		}
		b.aptUpdated = true
	}
	cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "-qq", "--no-install-recommends", pkg)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if err := runTool(cmd); err != nil {
		return err
	}
	_, err := exec.LookPath(command)
	return err
}
