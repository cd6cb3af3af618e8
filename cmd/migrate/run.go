package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/metrics"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/runner"
	"github.com/migrate-dev/migrate/status"
)

// runFlags are `migrate run`'s flags.
type runFlags struct {
	pf                                planFlags
	asJSON, noVerify, noProgress, dry *bool
	follow                            *bool
	instance, report, metricsAddr     *string
	cpuProfile, memProfile            *string
	parallel                          *int
}

func (f *runFlags) register(fs *flag.FlagSet) {
	f.pf.register(fs)
	f.asJSON = fs.Bool("json", false, "print the result as one JSON object on stdout")
	f.instance = fs.String("instance", hostname(), "label for this instance in lease owner ids and status")
	f.noVerify = fs.Bool("no-verify", false, "skip the end-of-run verification")
	f.noProgress = fs.Bool("no-progress", false, "no progress bar even on a terminal")
	f.parallel = fs.Int("parallel", 0, "hold at most this many shards at once, leaving the others to other instances (0: the plan's shards, at most max(2, cores), at most what leaves half of each database's free connections)")
	f.report = fs.String("report", "", "with --dry-run: also write the forecast as a Markdown report to this file")
	f.metricsAddr = fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics and the status page at http://ADDR/ while running, e.g. 127.0.0.1:9090")
	f.cpuProfile = fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	f.memProfile = fs.String("memprofile", "", "write an allocation profile at the end of the run to this file (go tool pprof)")
	f.follow = fs.Bool("follow", false, "start a change stream at the source before the copy and keep applying it, after the copy too, until `migrate cutover` (docs/streaming.md)")
	f.dry = fs.Bool("dry-run", false, "report what the run would do (rows to insert or update, schema differences, DDL, an estimate); take no lease, write nothing")
}

// runCmd is `migrate run`: copy every shard of the plan as holder or
// standby; running it again after a crash resumes from the cursor.
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate run -p PLAN [--dry-run] [--json] [--instance NAME] [--no-verify] [--metrics-addr ADDR] [--parallel K] [--follow]\n\nCopies every shard of the plan; run it again to resume after a crash.\nExample: migrate run -p orders.yaml --instance node-a")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	plan, err := f.pf.load()
	if err != nil {
		return f.failure(stdout, nil, "", err)
	}
	if os.Getenv("GOGC") == "" {
		// The heap is a few pages of rows: trading a little memory for a
		// quarter of the copy's CPU (measured: 3.8 s -> 2.1-3.0 s of user
		// time for 1M rows, peak RSS 24 -> 36 MB).
		debug.SetGCPercent(400)
	}
	stop, err := startProfiles(*f.cpuProfile, *f.memProfile)
	if err != nil {
		return err
	}
	defer stop()
	if *f.parallel < 0 {
		return f.failure(stdout, plan, "", usageError{"--parallel must not be negative"})
	}
	opts, stopMetrics, err := f.options(ctx, plan, stderr)
	defer stopMetrics()
	if err != nil {
		return f.failure(stdout, plan, opts.Owner, err)
	}
	opts.Log.Info("starting", "plan", plan.Name, "owner", opts.Owner, "source", plan.Source, "target", plan.Target, "lock", plan.LockName())
	opts.Deliver = !*f.dry
	r, err := openRunner(ctx, plan, opts, false)
	if err != nil {
		return f.failure(stdout, plan, opts.Owner, err)
	}
	defer r.Close()
	if *f.dry {
		return f.dryRun(ctx, r, plan.Name, stdout)
	}
	rep, runErr := r.Run(ctx)
	if runErr != nil {
		rep.Error = runErr.Error()
	}
	if *f.asJSON {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else if runErr == nil || len(rep.Shards) > 0 {
		printReport(stdout, rep)
	}
	return runErr
}

// options are the runner's: the owner id, the log (above the progress bar
// on a terminal), the progress bar, and metrics served at --metrics-addr
// until stop is called.
func (f *runFlags) options(ctx context.Context, plan *plans.Plan, stderr io.Writer) (opts runner.Options, stop func(), err error) {
	stop = func() {}
	var progress *bar
	logTo := stderr
	if !*f.noProgress && isTerminal(os.Stderr) {
		progress = newBar(stderr)
		logTo = progress // log lines go above the bar
	}
	log := f.pf.logger(logTo)
	for _, w := range plan.Warnings() {
		log.Warn(w)
	}
	opts = runner.Options{Instance: *f.instance, Owner: lock.NewOwnerID(*f.instance), NoVerify: *f.noVerify, Log: log, Parallel: *f.parallel, Follow: *f.follow}
	if progress != nil {
		opts.Progress = progress
	}
	if *f.metricsAddr != "" && !*f.dry {
		opts.Metrics = metrics.New(plan.Name)
		st, err := newRunStatus(&f.pf, log)
		if err != nil {
			return opts, stop, err
		}
		mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		stop = func() { cancel(); st.Close() }
		addr, err := serveHTTP(mctx, *f.metricsAddr, opts.Metrics, &status.Page{Read: st.Read, Plan: plan.Name})
		if err != nil {
			return opts, stop, err
		}
		log.Info("serving metrics", "url", "http://"+addr.String()+"/metrics", "status", "http://"+addr.String()+"/")
	}
	return opts, stop, nil
}

// dryRun prints what the run would do (and writes --report).
func (f *runFlags) dryRun(ctx context.Context, r *runner.Runner, plan string, stdout io.Writer) error {
	d, err := r.DryRun(ctx)
	if err != nil {
		if *f.asJSON {
			if d == nil {
				d = &runner.DryRun{}
			}
			d.Error = err.Error()
			printDryRunJSON(stdout, plan, d)
		}
		return err
	}
	if *f.report != "" {
		if err := writeReport(*f.report, func(w io.Writer) { writeDryRunMarkdown(w, d) }); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	if *f.asJSON {
		return writeJSON(stdout, d)
	}
	printDryRun(stdout, d)
	return nil
}

// failure reports a run that could not start (plan nil: not loaded):
// with --json still one JSON object on stdout, of the shape the run or the
// dry run prints, so scripts always have one to read.
func (f *runFlags) failure(stdout io.Writer, plan *plans.Plan, owner string, err error) error {
	if !*f.asJSON {
		return err
	}
	name := ""
	if plan != nil {
		name = plan.Name
	}
	if *f.dry {
		printDryRunJSON(stdout, name, &runner.DryRun{Error: err.Error()})
		return err
	}
	rep := &runner.Report{Plan: name, Instance: *f.instance, Owner: owner, Error: err.Error()}
	rep.Takeovers, rep.Shards = []runner.Takeover{}, []runner.ShardResult{}
	_ = writeJSON(stdout, rep)
	return err
}

// printDryRunJSON prints a dry run that failed, its lists empty rather
// than null.
func printDryRunJSON(stdout io.Writer, plan string, d *runner.DryRun) {
	d.Plan, d.DryRun = plan, true
	if d.Tables == nil {
		d.Tables = []runner.DryRunTable{}
	}
	if d.PostLoad == nil {
		d.PostLoad = []string{}
	}
	if d.NotMigrated == nil {
		d.NotMigrated = []string{}
	}
	_ = writeJSON(stdout, d)
}

func writeJSON(w io.Writer, v any) error { return status.WriteJSON(w, v) }

func printReport(w io.Writer, rep *runner.Report) {
	fmt.Fprintf(w, "plan %s: %d rows written in %d batches (%d replayed), %d stale rejections, %.1fs\n",
		rep.Plan, rep.RowsWritten, rep.Batches, rep.ReplayedRows, rep.StaleRejections, float64(rep.ElapsedMs)/1000)
	for _, s := range rep.Shards {
		by := ""
		if s.ByOther {
			by = " (done earlier or by another instance)"
		}
		fmt.Fprintf(w, "  %s#%d  %-7s token %d  %d rows%s\n", s.Table, s.Shard, s.State, s.Token, s.Rows, by)
	}
	for _, t := range rep.Takeovers {
		fmt.Fprintf(w, "  takeover %s#%d from %s: token %d, resumed after %s, replayed %d rows, rto %dms (wait %d + elect %d + recover %d + verify %d; predicted wait <= %d)\n",
			t.Table, t.Shard, t.PreviousOwner, t.Token, t.ResumedAfter, t.ReplayedRows, t.RtoMs, t.WaitMs, t.ElectMs, t.RecoverMs, t.VerifyMs, t.PredictedRtoMs)
	}
	if pl := rep.PostLoad; pl != nil {
		if pl.ByOther {
			fmt.Fprintln(w, "  post-load: done earlier or by another instance")
		} else {
			fmt.Fprintf(w, "  post-load: %d sequence resets, %d indexes and foreign keys created, %d views, routines and triggers created, %.1fs\n", pl.Sequences, pl.Steps, pl.Objects, float64(pl.ElapsedMs)/1000)
		}
	}
	printNotes(w, rep.Notes, rep.NotMigrated)
	if rep.Verify != nil {
		printVerification(w, rep.Verify)
	}
}

// printNotes lists what the target does not reproduce and what is not
// migrated.
func printNotes(w io.Writer, notes, notMigrated []string) {
	if len(notes) > 0 {
		fmt.Fprintln(w, "not reproduced in the target:")
		for _, n := range notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	if len(notMigrated) > 0 {
		fmt.Fprintln(w, "not migrated (create them on the target yourself):")
		for _, n := range notMigrated {
			fmt.Fprintln(w, "  "+n)
		}
	}
}

// printDryRun writes a dry run's forecast as a table, then per table its
// schema differences and DDL.
func printDryRun(w io.Writer, d *runner.DryRun) {
	fmt.Fprintf(w, "dry run of plan %s: nothing was written, no lease was taken\n", d.Plan)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tSOURCE ROWS\tWOULD INSERT\tWOULD UPDATE\tUNCHANGED\tTARGET ONLY\tESTIMATE")
	for _, t := range d.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Table, t.SourceRows, t.WouldInsert, t.WouldUpdate, t.Unchanged, t.TargetOnly,
			(time.Duration(t.EstimateMs) * time.Millisecond).Round(time.Second))
	}
	_ = tw.Flush()
	for _, t := range d.Tables {
		for _, s := range t.Schema {
			fmt.Fprintf(w, "  %s: %s\n", t.Table, s)
		}
		for _, q := range t.DDL {
			fmt.Fprintf(w, "  %s would run:\n    %s\n", t.Table, strings.ReplaceAll(q, "\n", "\n    "))
		}
		for _, n := range t.Notes {
			fmt.Fprintf(w, "  %s: not reproduced: %s\n", t.Table, n)
		}
	}
	if len(d.PostLoad) > 0 {
		fmt.Fprintln(w, "after every table's data, the post-load phase would run:")
		for _, q := range d.PostLoad {
			fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(q, "\n", "\n    "))
		}
	}
	printNotes(w, nil, d.NotMigrated)
}

// startProfiles starts a CPU profile into cpu and returns a function that
// ends it and writes the allocation profile into mem; either name may be "".
func startProfiles(cpu, mem string) (func(), error) {
	var cpuFile *os.File
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return nil, fmt.Errorf("cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("cpuprofile: %w", err)
		}
		cpuFile = f
	}
	return func() {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			_ = cpuFile.Close()
		}
		if mem != "" {
			if f, err := os.Create(mem); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}
	}, nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "migrate"
	}
	return h
}
