package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/migrate-dev/migrate/runner"
)

// child is one `migrate run` instance started by the drill.
type child struct {
	name   string // its --instance label
	role   string // holder or standby
	cmd    *exec.Cmd
	stdout bytes.Buffer // written by exec's copier until done
	stderr *lineLog
	done   chan struct{}
	killed bool // killed by the drill (the kill drill's SIGKILL, or SIGQUIT when hung)
}

// startChild starts `bin run ... --instance name` with env added to the
// drill's environment.
func startChild(ctx context.Context, bin, name, role string, args, env []string, log io.Writer) (*child, error) {
	c := &child{name: name, role: role, done: make(chan struct{}), stderr: &lineLog{prefix: "[" + name + "] ", to: log}}
	c.cmd = exec.CommandContext(ctx, bin, append(append([]string{"run"}, args...),
		"--json", "--no-progress", "--no-verify", "--instance", name)...)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, c.stderr
	// An instance still running when the drill gives up (its context
	// ends) dumps its goroutines into its log before it is killed: that
	// is what tells where it hung.
	c.cmd.Cancel = func() error { return c.cmd.Process.Signal(syscall.SIGQUIT) }
	c.cmd.WaitDelay = 5 * time.Second
	setPdeathsig(c.cmd)
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	return c, nil
}

// signal sends sig unless the process has exited.
func (c *child) signal(sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		c.killed = true
	}
	err := c.cmd.Process.Signal(sig)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to end, at most limit (0: no limit); past it
// the process is killed and wait reports false.
func (c *child) wait(ctx context.Context, limit time.Duration) bool {
	var timeout <-chan time.Time
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-c.done:
		return true
	case <-ctx.Done():
	case <-timeout:
	}
	_ = c.signal(syscall.SIGCONT) // a stopped process cannot be waited for otherwise
	// SIGQUIT first: Go's runtime writes every goroutine's stack to the
	// log, which tells where the instance hung.
	c.killed = true
	_ = c.signal(syscall.SIGQUIT)
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
		_ = c.signal(syscall.SIGKILL)
		<-c.done
	}
	return false
}

// exitCode is the process's exit code, -1 when a signal ended it.
func (c *child) exitCode() int { return c.cmd.ProcessState.ExitCode() }

// report decodes the process's `run --json` output; nil when it printed
// none (killed).
func (c *child) report() *runner.Report {
	var rep runner.Report
	if json.Unmarshal(c.stdout.Bytes(), &rep) != nil {
		return nil
	}
	return &rep
}

// lineLog keeps a process's log lines and copies them, prefixed, to a
// writer.
type lineLog struct {
	prefix string
	to     io.Writer // may be nil

	mu      sync.Mutex
	partial []byte
	lines   []string
}

var logMu sync.Mutex // one line at a time on the shared writer

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		l.lines = append(l.lines, line)
		if l.to != nil {
			logMu.Lock()
			_, _ = io.WriteString(l.to, l.prefix+line+"\n")
			logMu.Unlock()
		}
	}
	return len(p), nil
}

// count returns how many lines contain every one of subs.
func (l *lineLog) count(subs ...string) int {
	return len(l.matching(subs...))
}

// matching returns the lines that contain every one of subs.
func (l *lineLog) matching(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(line, s) }) {
			out = append(out, line)
		}
	}
	return out
}

// tail returns the last n lines.
func (l *lineLog) tail(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines[max(0, len(l.lines)-n):]...)
}
