package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/migrate-dev/migrate/runner"
)

// cutoverCmd is `migrate cutover`: the operator's step once the application
// stopped writing to the source (docs/streaming.md).
func cutoverCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cutover", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	maxLag := fs.Duration("max-lag", 0, "refuse to cut over when the stream is further behind than this (0: any); the write freeze lasts about that long")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up, changing nothing, when the stream has not caught up by then")
	keepSlot := fs.Bool("keep-slot", false, "leave the replication slot and publication at the source (PostgreSQL)")
	noVerify := fs.Bool("no-verify", false, "skip the verification of the tables")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate cutover -p PLAN [--max-lag D] [--timeout D] [--keep-slot] [--no-verify] [--json]\n\nRun it once the application has stopped writing to the source: waits until the change stream\nhas applied everything the source has, verifies the tables, stops the stream and drops its\nreplication slot; prints the write-freeze window it measured.\nExample: migrate cutover -p orders.yaml --max-lag 5s --timeout 2m")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if pf.path == "" {
		return usageError{"cutover needs -p PLAN"}
	}
	plan, err := pf.load()
	if err != nil {
		return err
	}
	r, err := openRunner(ctx, plan, runner.Options{Log: pf.logger(stderr)}, false)
	if err != nil {
		return err
	}
	defer r.Close()
	c, err := r.Cutover(ctx, runner.CutoverOptions{MaxLag: *maxLag, Timeout: *timeout, KeepSlot: *keepSlot, NoVerify: *noVerify})
	if *asJSON {
		if jerr := writeJSON(stdout, c); jerr != nil {
			return jerr
		}
		return err
	}
	if c.Verify != nil {
		printVerification(stdout, c.Verify)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cutover of %s: the stream applied everything up to %s (the source's end was %s)\n", plan.Name, c.AppliedPos, c.SourcePos)
	fmt.Fprintf(stdout, "write freeze: %s (catch-up %s, verification %s); lag when it began: %s\n",
		ms(c.FreezeMs), ms(c.CatchUpMs), ms(c.VerifyMs), ms(c.LagAtStartMs))
	if c.SlotDropped {
		fmt.Fprintln(stdout, "the stream is stopped and its replication slot dropped; point the application at the target")
	} else {
		fmt.Fprintln(stdout, "the stream is stopped; its slot was kept (--keep-slot): drop it with `migrate abandon` when done")
	}
	return nil
}

// abandonCmd is `migrate abandon`: stop a plan's stream and drop what it
// keeps at the source, for a plan given up.
func abandonCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("abandon", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate abandon -p PLAN\n\nStops the plan's change stream and drops its replication slot and publication at the source,\nso that the source stops keeping its log for it. The target's tables are left as they are.\nExample: migrate abandon -p orders.yaml")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if pf.path == "" {
		return usageError{"abandon needs -p PLAN"}
	}
	plan, err := pf.load()
	if err != nil {
		return err
	}
	r, err := openRunner(ctx, plan, runner.Options{Log: pf.logger(stderr)}, false)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.Abandon(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "the change stream of %s is stopped and what it kept at the source is dropped\n", plan.Name)
	return nil
}

// ms prints milliseconds as a duration.
func ms(n int64) string { return (time.Duration(n) * time.Millisecond).String() }
