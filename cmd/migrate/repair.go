package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/runner"
)

// repairCmd is `migrate repair`: fix what verify finds, under the lease
// and the fence, then verify again.
func repairCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("repair", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	deleteExtra := fs.Bool("delete-extra", false, "also delete target rows that the source does not have")
	instance := fs.String("instance", hostname(), "label for this instance in lease owner ids")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate repair -p PLAN [--table NAME] [--delete-extra] [--json]\n\nCopies missing and changed rows again from the source under every shard's lease and fence;\ndeletes target-only rows only with --delete-extra; then verifies again (exit 0 clean, 3 not).\nExample: migrate repair -p orders.yaml --table public.orders")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if pf.path == "" {
		return usageError{"repair needs -p PLAN"}
	}
	table := pf.o.Table
	pf.o.Table = ""
	plan, err := pf.load()
	if err != nil {
		return err
	}
	r, err := openRunner(ctx, plan, runner.Options{Instance: *instance, Owner: lock.NewOwnerID(*instance), Log: pf.logger(stderr)}, false)
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := r.Repair(ctx, table, *deleteExtra)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		for _, t := range rep.Tables {
			fmt.Fprintf(stdout, "repaired %s: %d rows copied again, %d target-only rows deleted, %d left (use --delete-extra)\n", t.Table, t.Recopied, t.Deleted, t.ExtraLeft)
		}
		printVerification(stdout, rep.Verify)
	}
	if !rep.Verify.Equal {
		return runner.ErrDiff
	}
	return nil
}
