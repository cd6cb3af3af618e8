package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/migrate-dev/migrate/plans"
)

// waitDelay bounds the wait for a command's stderr once it has exited (or
// was killed): a child it left running in the background may hold the
// pipe open, and is not waited for.
const waitDelay = 2 * time.Second

// maxStderr is how much of a command's stderr is kept, its end: an error
// quotes the last maxDetail bytes, and more is kept so that the last
// line is whole after white space is folded.
const maxStderr = 4 << 10

// command runs a program for each event.
type command struct {
	name string
	filter
	timeout time.Duration
	argv    []string
}

func newCommand(name string, f filter, timeout time.Duration, c *plans.Command) (*command, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, errors.New("command: no program")
	}
	// Found now, so that a plan naming a program that is not there fails
	// when it is loaded, not at its first event; exec looks again for
	// each run.
	if _, err := exec.LookPath(c.Argv[0]); err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	return &command{name: name, filter: f, timeout: timeout, argv: append([]string(nil), c.Argv...)}, nil
}

func (s *command) Name() string { return s.name }

// Send runs the program once: the event's JSON on its stdin, its id and
// type in MIGRATE_EVENT_ID and MIGRATE_EVENT_TYPE. Exit 0 delivers it.
// The program runs in a process group of its own, killed as a whole when
// the sink's timeout or ctx ends, so that a child it started (a curl, a
// sleep) is not left behind.
func (s *command) Send(ctx context.Context, e Event) Result {
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmd := exec.CommandContext(actx, s.argv[0], s.argv[1:]...)
	cmd.Stdin = bytes.NewReader(e.Body)
	stderr := &tailBuffer{max: maxStderr}
	cmd.Stderr = stderr // stdout: /dev/null
	cmd.Env = append(os.Environ(), "MIGRATE_EVENT_ID="+e.ID, "MIGRATE_EVENT_TYPE="+e.Type)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The group's id is the leader's pid (Setpgid). SIGKILL: the time
		// to finish was the timeout, and a child that ignores SIGTERM
		// would outlive its shell.
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	if err == nil || (errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState.Success()) {
		// ErrWaitDelay with exit 0: it exited, and a child left in the
		// background still held its stderr. The program said delivered.
		return Result{}
	}
	if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		return Result{Err: s.errorf("no exit within %v; its process group was killed%s", s.timeout, stderr.quote())}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return Result{Err: s.errorf("%s%s", ee.ProcessState, stderr.quote())}
	}
	return Result{Err: s.errorf("%w%s", err, stderr.quote())}
}

func (s *command) errorf(format string, args ...any) error {
	return fmt.Errorf("sink %s: command %s: "+format, append([]any{s.name, s.argv[0]}, args...)...)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[:copy(t.b, t.b[over:])]
	}
	return len(p), nil
}

// quote is ": " and the end of what was written, as one line, or "".
func (t *tailBuffer) quote() string {
	q := tail(oneLine(t.b), maxDetail)
	if q == "" {
		return ""
	}
	return ": " + q
}
