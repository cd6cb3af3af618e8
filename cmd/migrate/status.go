package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/migrate-dev/migrate/runner"
)

// statusCmd is `migrate status`: the durable state of a plan.
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	asJSON := fs.Bool("json", false, "print the status as one JSON object on stdout")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate status -p PLAN [--json]\n\nShows per table the shards done, rows, rate and ETA; per shard its checkpoint, rate, ETA and fence watermark; and live leases.\nExample: migrate status -p orders.yaml --json")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	plan, err := pf.load()
	if err != nil {
		return err
	}
	r, err := openRunner(ctx, plan, runner.Options{Log: pf.logger(stderr)}, true)
	if err != nil {
		return err
	}
	defer r.Close()
	st, err := r.Status(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, st)
	}
	fmt.Fprintf(stdout, "plan %s\n", st.Plan)
	if len(st.Tables) == 0 {
		fmt.Fprintln(stdout, "no checkpoints yet: the plan has not run against this target")
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if len(st.Tables) > 0 {
		fmt.Fprintln(tw, "TABLE\tSHARDS DONE\tRUNNING\tROWS\tESTIMATED\tRATE\tETA")
		for _, t := range st.Totals {
			est := "-"
			if t.RowsEstimated != nil {
				est = fmt.Sprint(*t.RowsEstimated)
			}
			fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%s\t%s\t%s\n", t.Table, t.ShardsDone, t.Shards, t.ShardsRunning, t.RowsDone, est, rate(t.RowsPerSec), eta(t.EtaMs))
		}
		_ = tw.Flush()
		fmt.Fprintln(stdout)
	}
	fmt.Fprintln(tw, "TABLE\tSHARD\tSTATE\tROWS\tRATE\tETA\tLAST KEY\tTOKEN\tWATERMARK\tUPDATED\tTAKEOVERS\tLAST RTO")
	for _, t := range st.Tables {
		last := string(t.LastKey)
		if last == "null" {
			last = "-"
		}
		rto := "-"
		var tk runner.Takeover
		if json.Unmarshal(t.LastTakeover, &tk) == nil && tk.Token != 0 {
			rto = fmt.Sprintf("%dms (predicted <= %dms)", tk.RtoMs, tk.PredictedRtoMs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\n", t.Table, t.Shard, t.State, t.RowsDone, rate(t.RowsPerSec), eta(t.EtaMs), last, t.Token, t.Watermark, t.UpdatedAt, t.Takeovers, rto)
	}
	_ = tw.Flush()
	if pl := st.PostLoad; pl != nil {
		fmt.Fprintf(stdout, "post-load phase: %s, %d of %d indexes and foreign keys created\n", pl.State, pl.StepsDone, pl.Steps)
	}
	if len(st.Leases) == 0 {
		fmt.Fprintln(stdout, "leases: none held")
	}
	for _, l := range st.Leases {
		ttl := fmt.Sprintf("ttl %dms", l.TTLMs)
		if l.TTLMs == 0 { // ZooKeeper: a session's time left is the server's alone
			ttl = "ttl not told by the lock service"
		}
		fmt.Fprintf(stdout, "lease %s#%d held by %s, token %d, %s\n", l.Table, l.Shard, l.Owner, l.Token, ttl)
	}
	return nil
}

// rate shows rows per second, "-" when unknown.
func rate(perSec *float64) string {
	if perSec == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f rows/s", *perSec)
}

// eta shows time left, "-" when unknown.
func eta(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return (time.Duration(*ms) * time.Millisecond).Round(time.Second).String()
}
