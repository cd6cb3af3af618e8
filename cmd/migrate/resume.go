package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/migrate-dev/migrate/runner"
)

// resumeCmd is `migrate resume`: an operator's go-ahead for halted shards.
func resumeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	shard := fs.Int("shard", -1, "only this shard (default: every halted shard)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate resume -p PLAN [--table NAME] [--shard N]\n\nSets halted shards back to pending, so the next `migrate run` takes them up.\nExample: migrate resume -p orders.yaml --table public.orders")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	table := pf.o.Table
	pf.o.Table = "" // a table filter here, not the plan-less form
	if pf.path == "" {
		return usageError{"resume needs -p PLAN"}
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
	n, err := r.Resume(ctx, table, *shard)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "resumed %d halted shard(s) of plan %s; run `migrate run -p %s` to continue\n", n, plan.Name, pf.path)
	return nil
}
