package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/migrate-dev/migrate/status"
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
	rd, closeStatus, err := openStatus(ctx, plan, pf.logger(stderr))
	if err != nil {
		return err
	}
	defer closeStatus()
	st, err := rd.Read(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, st)
	}
	return status.Render(stdout, st)
}
