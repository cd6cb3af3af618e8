package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/schema"
)

// validateCmd is `migrate validate`: parse and check a plan; connect to
// nothing unless the plan's tables or keys are to be found in its source,
// which it then reads (never writes).
func validateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate validate -p PLAN\n\nChecks the plan file (errors name file:line:column). It connects to nothing,\nunless the plan discovers its tables (no tables list, or include/exclude) or\nleaves a key out: then it reads the source's catalog and prints the tables found\nand, between two databases of one engine, the views, routines and triggers the\npost-load phase creates.\nExample: migrate validate -p orders.yaml")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	p, err := pf.load()
	if err != nil {
		return err
	}
	var objs *schema.Objects
	if p.Unresolved() {
		db, d, err := openDB(ctx, p.Source, dialect.Session{})
		if err != nil {
			return fmt.Errorf("source %s: %w", p.Source, err)
		}
		defer db.Close()
		if err := resolve(ctx, p, db, d); err != nil {
			return err
		}
		if objs, err = sameEngineObjects(ctx, p, db, d); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "plan %s is valid: %d table(s), source %s, target %s, lock %s, batch %d, lease ttl %s\n",
		p.Name, len(p.Tables), p.Source, p.Target, p.LockName(), p.BatchSize, p.LeaseTTL)
	for _, t := range p.Tables {
		shards := "auto"
		if t.Shards != plans.ShardsAuto {
			shards = strconv.Itoa(t.Shards)
		}
		fmt.Fprintf(stdout, "  %s -> %s key %v shards %s\n", t.Name, t.Target, t.Key, shards)
	}
	if objs != nil {
		for _, st := range objs.Steps {
			fmt.Fprintf(stdout, "  post-load creates %s %s\n", st.Kind, st.Name)
		}
		for _, o := range objs.Reported {
			fmt.Fprintf(stdout, "  post-load does not create %s %s: %s\n", o.Kind, o.Name, o.Note)
		}
	}
	for _, w := range p.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return nil
}

// sameEngineObjects reads the views, materialized views, routines and
// triggers the post-load phase of a plan between two databases of one
// engine creates (nil across engines), from its source db; the plan's
// tables are resolved.
func sameEngineObjects(ctx context.Context, p *plans.Plan, db *sql.DB, d dialect.Dialect) (*schema.Objects, error) {
	if p.Source.Engine() != p.Target.Engine() {
		return nil, nil
	}
	var names [][]string
	for _, t := range p.Tables {
		if schema.SameName(t.SourceIdent(), t.TargetIdent()) {
			names = append(names, t.SourceIdent())
		}
	}
	return schema.ReadObjects(ctx, db, d, names)
}
