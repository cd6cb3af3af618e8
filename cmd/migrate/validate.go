package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// validateCmd is `migrate validate`: parse and check a plan, connect to
// nothing.
func validateCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate validate -p PLAN\n\nChecks the plan file (errors name file:line:column); connects to nothing.\nExample: migrate validate -p orders.yaml")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	p, err := pf.load()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "plan %s is valid: %d table(s), source %s, target %s, redis %s, batch %d, lease ttl %s\n",
		p.Name, len(p.Tables), p.Source, p.Target, p.Redis, p.BatchSize, p.LeaseTTL)
	for _, t := range p.Tables {
		fmt.Fprintf(stdout, "  %s -> %s key %v shards %d\n", t.Name, t.Target, t.Key, t.Shards)
	}
	for _, w := range p.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return nil
}
