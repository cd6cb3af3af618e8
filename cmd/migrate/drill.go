package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/drill"
	"github.com/migrate-dev/migrate/runner"
)

// errDrillFailed: a drill ran and missed a pass criterion (exit 1).
var errDrillFailed = errors.New("drill failed; see the checks above")

// drillCmd is `migrate drill`: a fault drill against real services (SPEC §8).
func drillCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("drill", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	rows := fs.Int64("rows", 0, "inject the fault once the holder has committed this many rows (default: 3 batches; the stream drills strike once the stream has applied changes)")
	latency := fs.Duration("holder-latency", 0, "delay every target response to the holder by this much, so that a small table's copy lasts long enough for the fault, e.g. 20ms")
	standbys := fs.Int("standbys", 1, "standby instances")
	writeRate := fs.Float64("write-rate", drill.DefaultWriteRate, "stream-kill, stream-pause: the writer's transactions per second at the source")
	persistence := fs.String("persistence", "both", "lock-restart: the lock service restarted with its data (on), without (off), or both runs")
	reset := fs.Bool("reset", false, "start over on a plan that has run: drop its target tables, delete its checkpoints, watermarks and what the lock service keeps of its leases")
	redisServer := fs.String("redis-server", "redis-server", "redis-server binary, for lock-restart of a Redis")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: migrate drill -p PLAN KIND [--json] [--rows N] [--lease-ttl D] [--holder-latency D] [--standbys N] [--persistence on|off|both] [--write-rate N] [--reset]

Runs the plan with a holder and standby instances of this binary, injects a
fault into the holder and reports the takeover (RTO measured vs predicted),
rows replayed, stale writes rejected and accepted, and the final verification.
stream-kill and stream-pause run the instances with --follow while a writer
changes the source, strike the instance applying the change stream, then cut
over, and report the stream's takeover, the changes applied twice and the
write freeze.
notify kills the holder mid-copy, then the standby that took over right after
a webhook accepted its first shard.done (before it marked it delivered), lets
a fresh instance finish, and counts the run events the drill's own receiver
got against those the outbox recorded: the instances run a copy of the plan
file whose notify: is one webhook to the drill; the plan's own sinks get
nothing. It needs -p PLAN.
KIND: %s.
The target must be fresh (no rows, checkpoints or remembered lease holders of
the plan) or --reset given. Exit 0 when every criterion passed, 3 when the verification
found differences, 1 otherwise.
Example: migrate drill -p orders.yaml kill --lease-ttl 5s
`, strings.Join(kindNames(), ", "))
		fs.PrintDefaults()
	}
	kind, err := parseDrill(fs, args, stderr)
	if err != nil {
		return err
	}
	if drill.Kind(kind) == drill.Notify && pf.path == "" {
		return usageError{"the notify drill needs a plan file: give -p PLAN (its instances run a copy of it whose notify: sends the run events to the drill)"}
	}
	plan, err := pf.load()
	if err != nil {
		return drillFailure(stdout, *asJSON, "", err)
	}
	log := pf.logger(stderr)
	opts := drill.Options{
		Kind: drill.Kind(kind), Plan: plan, PlanArgs: childPlanArgs(fs, &pf), OpenRunner: openRunner, OpenStatus: openStatus,
		FaultAfter: *rows, HolderLatency: *latency, Standbys: *standbys, Persistence: *persistence, WriteRate: *writeRate,
		Reset: *reset, RedisServer: *redisServer, Log: log,
	}
	if pf.verbose {
		opts.ChildLog = stderr
	}
	res, err := drill.Run(ctx, opts)
	if errors.Is(err, drill.ErrNotFresh) {
		err = usageError{err.Error()}
	}
	if err != nil && res == nil {
		return drillFailure(stdout, *asJSON, plan.Name, err)
	}
	if err != nil {
		res.Pass, res.Error = false, err.Error()
	}
	if *asJSON {
		if werr := writeJSON(stdout, res); werr != nil {
			return werr
		}
	} else {
		printDrill(stdout, res)
	}
	switch {
	case err != nil:
		return err
	case res.Pass:
		return nil
	case res.Diff():
		return runner.ErrDiff
	default:
		return errDrillFailed
	}
}

// drillFailure reports a drill that could not run: with --json still one
// JSON object on stdout.
func drillFailure(stdout io.Writer, asJSON bool, plan string, err error) error {
	if asJSON {
		_ = writeJSON(stdout, &drill.Result{Plan: plan, Drills: []drill.Report{}, Error: err.Error()})
	}
	return err
}

func kindNames() []string {
	s := make([]string, len(drill.Kinds))
	for i, k := range drill.Kinds {
		s[i] = string(k)
	}
	return s
}

// parseDrill parses flags placed before or after KIND and returns KIND.
func parseDrill(fs *flag.FlagSet, args []string, stderr io.Writer) (string, error) {
	fs.SetOutput(stderr)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return "", err
			}
			return "", usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	switch {
	case len(pos) == 0:
		return "", usageError{"no drill kind: give one of " + strings.Join(kindNames(), ", ")}
	case len(pos) > 1:
		return "", usageError{fmt.Sprintf("unexpected argument %q", pos[1])}
	}
	for _, k := range drill.Kinds {
		if pos[0] == string(k) {
			return pos[0], nil
		}
	}
	return "", usageError{fmt.Sprintf("unknown drill kind %q: give one of %s", pos[0], strings.Join(kindNames(), ", "))}
}

// childPlanArgs are the flags that give a child `migrate run` the same plan:
// the plan file and every plan flag set on the command line, except the
// DSNs, which the drill hands over in the environment.
func childPlanArgs(fs *flag.FlagSet, pf *planFlags) []string {
	var args []string
	if pf.path != "" {
		args = append(args, "-p", pf.path)
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "name", "table", "target-table", "key", "columns", "shards", "batch-size", "lease-ttl":
			args = append(args, "--"+f.Name, f.Value.String())
		}
	})
	return args
}

// printDrill writes the drills' reports as text.
func printDrill(w io.Writer, res *drill.Result) {
	for _, d := range res.Drills {
		name := string(d.Kind)
		if d.Persistence != "" {
			name += " (persistence " + d.Persistence + ")"
		}
		verdict := "PASS"
		if !d.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "drill %s on plan %s: %s\n", name, res.Plan, verdict)
		fmt.Fprintf(w, "  lease TTL %dms, batch %d rows; fault at %d rows committed, lasting %dms\n", d.TTLMs, d.BatchSize, d.FaultAtRows, d.FaultMs)
		for _, in := range d.Instances {
			exit := fmt.Sprintf("exit %d", in.Exit)
			if in.Exit == -1 {
				exit = "killed"
			}
			fmt.Fprintf(w, "  %-8s %-7s %-8s %d rows written, %d replayed, %d stale rejections, %d takeovers %s\n",
				in.Name, in.Role, exit, in.RowsWritten, in.ReplayedRows, in.StaleRejections, in.Takeovers, in.Owner)
		}
		for _, t := range d.Takeovers {
			fmt.Fprintf(w, "  takeover %s#%d by %s: token %d after %d (%s), resumed after %s: rto %dms (wait %d + elect %d + recover %d + verify %d), predicted %dms; %d rows replayed\n",
				t.Table, t.Shard, t.Instance, t.Token, t.PreviousToken, t.PreviousOwner, t.ResumedAfter, t.RtoMs, t.WaitMs, t.ElectMs, t.RecoverMs, t.VerifyMs, t.PredictedRtoMs, t.ReplayedRows)
		}
		for _, s := range d.Shards {
			fmt.Fprintf(w, "  shard %s#%d: holder token %d, final token %d (%s); stale writes accepted: %d committed after the takeover, %d after the resume key\n",
				s.Table, s.Shard, s.HolderToken, s.FinalToken, s.FinalState, s.StaleCommitted, s.StaleAfterResume)
		}
		if s := d.Stream; s != nil {
			printStream(w, s)
		}
		if n := d.Notify; n != nil {
			printNotify(w, n)
		}
		if l := d.LateWrite; l != nil {
			fmt.Fprintf(w, "  late write: %d bytes held %dms, delivered %dms after the takeover\n", l.HeldBytes, l.HeldMs, l.DeliveredAfterTakeoverMs)
		}
		rto := "no takeover recorded"
		if len(d.Takeovers) > 0 || d.Stream != nil {
			rto = fmt.Sprintf("rto %dms (predicted %dms)", d.RtoMs, d.PredictedRtoMs)
		}
		if d.HandoverMs > 0 {
			rto += fmt.Sprintf(", handover seen %dms after the fault", d.HandoverMs)
		}
		fmt.Fprintf(w, "  %s; %d rows replayed (%d batches), %d stale writes rejected, %d accepted\n",
			rto, d.ReplayedRows, d.ReplayedBatches, d.StaleRejections, d.StaleWritesAccepted)
		if d.Verify != nil {
			printVerification(w, d.Verify)
		}
		for _, c := range d.Checks {
			mark := "ok  "
			if !c.Pass {
				mark = "FAIL"
			}
			fmt.Fprintf(w, "  [%s] %s: %s\n", mark, c.Name, c.Detail)
		}
		if d.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", d.Error)
		}
		for _, in := range d.Instances {
			for _, l := range in.LogTail {
				fmt.Fprintf(w, "  %s| %s\n", in.Name, l)
			}
		}
	}
	if res.Error != "" {
		fmt.Fprintf(w, "drill error: %s\n", res.Error)
	}
}

// printStream writes a stream drill's measurements of the change stream.
func printStream(w io.Writer, s *drill.StreamReport) {
	fmt.Fprintf(w, "  stream takeover by %s: token %d after %d, opened the stream %dms after the fault (claim seen after %dms, first changes applied after %dms)\n",
		s.Successor, s.SuccessorToken, s.HolderToken, s.RtoMs, s.HandoverMs, s.FirstApplyMs)
	fmt.Fprintf(w, "  stream: committed %s at the takeover, resumed from %s; %d changes applied (%d after the takeover), the writer committed %d in %d transactions: %d applied twice; stale applier transactions refused: %d\n",
		s.PosAtTakeover, s.ResumedFrom, s.AppliedChanges, s.ChangesAfterTakeover, s.Writer.Changes, s.Writer.Transactions, s.ReplayedChanges, s.StaleRefused)
	if c := s.Cutover; c != nil {
		fmt.Fprintf(w, "  cutover: caught up with %s in %s, verified in %s: write freeze %s (lag at start %s); slot dropped %v\n",
			c.SourcePos, ms(c.CatchUpMs), ms(c.VerifyMs), ms(c.FreezeMs), ms(c.LagAtStartMs), c.SlotDropped)
	}
}

// printNotify writes the notify drill's tally of the run events.
func printNotify(w io.Writer, n *drill.NotifyReport) {
	for _, t := range n.TakenOver {
		fmt.Fprintf(w, "  event shard.taken_over %s#%d: token %d after %d (%s) by %s, rto %dms to the claim (predicted %dms)\n",
			t.Table, t.Shard, t.Token, t.PreviousToken, t.PreviousOwner, cmp.Or(t.Instance, "?"), t.RtoMs, t.PredictedRtoMs)
	}
	fmt.Fprintf(w, "  run events: %d recorded, %d delivered, %d redelivered, %d lost, %d duplicates after de-duplication, %d out of order, %d rejected (bad signatures)\n",
		n.Produced, n.Delivered, n.Redelivered, n.Lost, n.Duplicates, n.OutOfOrder, n.Rejected)
	types := make([]string, 0, len(n.ByType))
	for _, t := range slices.Sorted(maps.Keys(n.ByType)) {
		types = append(types, fmt.Sprintf("%s %d", t, n.ByType[t]))
	}
	again := "none"
	if len(n.RedeliveredEvents) > 0 {
		again = strings.Join(n.RedeliveredEvents, ", ")
	}
	fmt.Fprintf(w, "  run events by type: %s; delivered again: %s\n", strings.Join(types, ", "), again)
}
