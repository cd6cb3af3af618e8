// Command migrate copies large tables between PostgreSQL and MySQL/MariaDB in
// checkpointed batches under a lease (in the target database, Redis, etcd or
// ZooKeeper), fenced at the target, and resumes
// after a crash by simply running it again. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/runner"
)

// Exit codes: the contract of SPEC §4.
const (
	exitOK     = 0
	exitError  = 1
	exitUsage  = 2
	exitDiff   = 3
	exitFenced = 4
	exitHalted = 5
	// exitLagging: a cutover found the change stream behind, or not caught
	// up in time; it changed nothing.
	exitLagging = 6
	// exitInternal: migrate panicked (a bug). Not one of SPEC §4's codes:
	// Go's own exit code for a panic, 2, would read as a usage error.
	exitInternal = 70 // EX_SOFTWARE of sysexits.h
)

const usage = `migrate copies large tables between PostgreSQL and MySQL/MariaDB in
checkpointed batches under a lease (in the target database, Redis, etcd or
ZooKeeper), fenced at the target.

Usage:
  migrate run      -p PLAN [--dry-run] [--json] [--instance NAME] [--no-verify] [--metrics-addr ADDR] [--parallel K]
                   [--follow]
  migrate cutover  -p PLAN [--max-lag D] [--timeout D] [--keep-slot] [--no-verify] [--json]
  migrate abandon  -p PLAN
  migrate status   -p PLAN [--json] [--watch [--interval D]] [--serve ADDR]
  migrate verify   -p PLAN [--json] [--report FILE.md] [--table NAME]
  migrate repair   -p PLAN [--table NAME] [--delete-extra] [--json]
  migrate validate -p PLAN
  migrate resume   -p PLAN [--table NAME] [--shard N]
  migrate events   -p PLAN [--json] [--pending] [--sink NAME]
  migrate events   redeliver|deliver|enable -p PLAN ...   (run events and their webhooks)
  migrate drill    -p PLAN KIND [--json] [--reset]   (KIND: kill, pause, short-pause,
                   partition, late-write, lock-restart)

Without -p, a single table is described by flags:
  --source URL --target URL --table NAME --key COLS [--lock URL]
  (no --lock: the leases live in the target database; --redis URL is the
  Redis shorthand)

Run 'migrate COMMAND -h' for the flags of a command.
Exit codes: 0 done, 1 error, 2 usage or invalid plan, 3 differences found,
4 fenced (lease lost or token refused), 5 halted (needs an operator),
6 cutover: the change stream is not caught up (nothing was changed).
`

// usageError is a command-line mistake (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := guard(os.Stderr, func() int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"run":      runCmd,
		"status":   statusCmd,
		"validate": validateCmd,
		"resume":   resumeCmd,
		"verify":   verifyCmd,
		"repair":   repairCmd,
		"drill":    drillCmd,
		"cutover":  cutoverCmd,
		"abandon":  abandonCmd,
		"events":   eventsCmd,
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "help" {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	cmd, ok := cmds[name]
	if !ok {
		fmt.Fprintf(stderr, "migrate: unknown command %q\ntry: migrate run -p plan.yaml   (or migrate -h)\n", name)
		return exitUsage
	}
	warnArgvPasswords(args[1:], stderr)
	out := &countingWriter{w: stdout}
	err := cmd(ctx, args[1:], out, stderr)
	code := exitCode(err)
	if err != nil && out.n == 0 && wantsJSON(args[1:]) && !errors.Is(err, flag.ErrHelp) {
		// Every exit of a command given --json prints one object; a
		// command that failed before it could print its own gets this.
		_ = writeJSON(stdout, struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}{err.Error(), code})
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "migrate %s: %v\n", name, err)
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "try: migrate %s -h\n", name)
		}
	}
	return code
}

// countingWriter counts what a command wrote.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

// wantsJSON says whether a command's arguments ask for --json (before a
// "--" that ends the flags).
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-json", "--json", "-json=true", "--json=true":
			return true
		}
	}
	return false
}

func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue), errors.Is(err, plans.ErrInvalid):
		return exitUsage
	case errors.Is(err, runner.ErrInternal):
		return exitInternal
	case errors.Is(err, hold.ErrFenced):
		return exitFenced
	case errors.Is(err, hold.ErrHalted):
		return exitHalted
	case errors.Is(err, runner.ErrDiff):
		return exitDiff
	case errors.Is(err, runner.ErrLagging):
		return exitLagging
	default:
		return exitError
	}
}

// guard runs fn and turns a panic into "internal error: VALUE" and the stack
// on stderr, with every password of the DSNs loaded so far replaced by xxxxx,
// and exitInternal. (A panic in another goroutine still ends the process
// the runtime's way.)
func guard(stderr io.Writer, fn func() int) (code int) {
	defer func() {
		if v := recover(); v != nil {
			msg := fmt.Sprintf("internal error: %v\n\n%s", v, debug.Stack())
			fmt.Fprint(stderr, plans.Redact(msg, passwordsKnown()))
			code = exitInternal
		}
	}()
	return fn()
}
