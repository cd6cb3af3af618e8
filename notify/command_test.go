package notify

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/plans"
)

// script writes a shell script to a new directory and returns its path
// and the directory, which the tests pass it as $1 for its output.
func script(t *testing.T, body string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "notify.sh")
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

func commandSink(t *testing.T, timeout time.Duration, argv ...string) Sink {
	t.Helper()
	s, err := New(plans.Sink{Name: "ops", Command: &plans.Command{Argv: argv}, Timeout: timeout}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// gone reports whether process pid has ended (a zombie has: it waits only
// to be reaped, by whichever process adopted it).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')') // the state follows the command's name
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// readPID is the pid a script wrote to file.
func readPID(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the script wrote no pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestCommand_Send(t *testing.T) {
	ctx := context.Background()
	t.Run("Delivered", func(t *testing.T) {
		path, dir := script(t, `#!/bin/sh
cat > "$1/stdin"
printf '%s %s' "$MIGRATE_EVENT_ID" "$MIGRATE_EVENT_TYPE" > "$1/env"
echo "stdout is not kept"
`)
		if r := commandSink(t, 0, path, dir).Send(ctx, testEvent); r != (Result{}) {
			t.Fatalf("Send = %+v, want delivered", r)
		}
		for file, want := range map[string]string{"stdin": string(testEvent.Body), "env": testEvent.ID + " " + testEvent.Type} {
			if got, err := os.ReadFile(filepath.Join(dir, file)); err != nil || string(got) != want {
				t.Errorf("%s: %q, %v; want %q", file, got, err, want)
			}
		}
	})
	t.Run("ExitStatus", func(t *testing.T) {
		// More stderr than is quoted: the error keeps its end, as one
		// line.
		path, dir := script(t, `#!/bin/sh
echo "the first words" >&2
i=0; while [ $i -lt 100 ]; do printf 'filler ' >&2; i=$((i+1)); done
printf '\nreceiver said:\n\tno\n' >&2
exit 3
`)
		r := commandSink(t, 0, path, dir).Send(ctx, testEvent)
		checkErr(t, r.Err, "sink ops: command "+path+": exit status 3: …")
		if msg := r.Err.Error(); !strings.HasSuffix(msg, "filler receiver said: no") || strings.Contains(msg, "first words") || len(msg) > 400 {
			t.Errorf("error %q: want the end of stderr, on one line, short", msg)
		}
		if r.Gone || r.RetryAfter != 0 {
			t.Errorf("Send = %+v", r)
		}
	})
	t.Run("OnPath", func(t *testing.T) {
		if r := commandSink(t, 0, "true").Send(ctx, testEvent); r != (Result{}) {
			t.Errorf("true: %+v", r)
		}
		checkErr(t, commandSink(t, 0, "false").Send(ctx, testEvent).Err, "sink ops: command false: exit status 1")
	})
	t.Run("NotStarted", func(t *testing.T) {
		path, _ := script(t, "#!/nonexistent/interpreter\n")
		checkErr(t, commandSink(t, 0, path).Send(ctx, testEvent).Err, "sink ops: command "+path+": ", "no such file or directory")
	})
	t.Run("Timeout", func(t *testing.T) {
		// The script waits for a child, which holds stderr open too:
		// killing the shell alone would leave the child, and Send
		// waiting on the pipe.
		path, dir := script(t, `#!/bin/sh
sleep 60 &
echo $! > "$1/pid"
wait
`)
		start := time.Now()
		r := commandSink(t, time.Second, path, dir).Send(ctx, testEvent)
		checkErr(t, r.Err, "sink ops: command "+path+": no exit within 1s; its process group was killed")
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("Send took %v with a timeout of 1s", took)
		}
		pid := readPID(t, filepath.Join(dir, "pid"))
		for deadline := time.Now().Add(10 * time.Second); !gone(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("the script's child %d still runs after the timeout", pid)
			}
		}
	})
	t.Run("ChildLeftRunning", func(t *testing.T) {
		// Exit 0 while a child keeps stderr open: delivered, once
		// waitDelay has passed.
		path, dir := script(t, `#!/bin/sh
sleep 60 &
echo $! > "$1/pid"
exit 0
`)
		r := commandSink(t, 30*time.Second, path, dir).Send(ctx, testEvent)
		pid := readPID(t, filepath.Join(dir, "pid"))
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if r != (Result{}) {
			t.Errorf("Send = %+v, want delivered", r)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		checkErr(t, commandSink(t, 0, "true").Send(cctx, testEvent).Err, "context canceled")
	})
}
