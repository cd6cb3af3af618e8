package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/migrate-dev/migrate/runner"
)

// verifyCmd is `migrate verify`: compare source and target row by row.
func verifyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	report := fs.String("report", "", "also write a Markdown report to this file")
	noProgress := fs.Bool("no-progress", false, "no progress bar even on a terminal")
	live := fs.Bool("live", false, "while a change stream runs (run --follow): compare a differing table again, up to 3 more times a second apart, and report only the rows that differ every time")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate verify -p PLAN [--json] [--report FILE.md] [--table NAME] [--live]\n\nCompares every row of the source and target tables by canonical value.\nExit 0 when equal, 3 when not.\nExample: migrate verify -p orders.yaml --table public.orders")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	table := ""
	if pf.path != "" {
		table, pf.o.Table = pf.o.Table, "" // with a plan, --table picks one of its tables
	}
	plan, err := pf.load()
	if err != nil {
		return err
	}
	opts := runner.Options{Log: pf.logger(stderr)}
	if !*noProgress && isTerminal(os.Stderr) {
		bar := newBar(stderr)
		opts.Progress, opts.Log = bar, pf.logger(bar)
	}
	r, err := openRunner(ctx, plan, opts, false)
	if err != nil {
		return err
	}
	defer r.Close()
	rounds := 0
	if *live {
		rounds = 3
	}
	v, err := r.VerifyLive(ctx, table, rounds, time.Second)
	if err != nil {
		return err
	}
	if *report != "" {
		if err := writeReport(*report, func(w io.Writer) { writeMarkdown(w, plan.Name, v) }); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	if *asJSON {
		if err := writeJSON(stdout, v); err != nil {
			return err
		}
	} else {
		printVerification(stdout, v)
	}
	if !v.Equal {
		return runner.ErrDiff
	}
	return nil
}

// printVerification writes a verification as a table, then its samples.
func printVerification(w io.Writer, v *runner.Verification) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tSOURCE ROWS\tTARGET ROWS\tMISSING\tEXTRA\tCHANGED\tRESULT")
	for _, t := range v.Tables {
		result := "equal"
		if !t.Equal() {
			result = "DIFFERENT"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Table, t.SourceRows, t.TargetRows, t.Missing, t.Extra, t.Changed, result)
	}
	_ = tw.Flush()
	for _, t := range v.Tables {
		for _, s := range t.Samples {
			fmt.Fprintf(w, "  %s %s key %s", t.Table, s.Kind, s.Key)
			for _, c := range s.Columns {
				fmt.Fprintf(w, "  %s: %s -> %s", c, show(s.Source[c]), show(s.Target[c]))
			}
			fmt.Fprintln(w)
		}
	}
	if v.Equal {
		fmt.Fprintln(w, "verification: equal")
	} else {
		fmt.Fprintln(w, "verification: DIFFERENT")
	}
}

// show prints a sample value: NULL, or the canonical text quoted.
func show(v any) string {
	if v == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", v)
}
