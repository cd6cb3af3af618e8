package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/schema"
)

// validateCmd is `migrate validate`: parse and check a plan; connect to
// nothing unless the plan's tables or keys are to be found in its source,
// or its types checked against the other engine's, which it then reads
// (never writes).
func validateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate validate -p PLAN\n\nChecks the plan file (errors name file:line:column). It connects to nothing,\nunless the plan discovers its tables (no tables list, or include/exclude) or\nleaves a key out: then it reads the source's catalog and prints the tables found;\nor copies between engines: then it reads the source's table definitions, checks\nthat every column's type maps and its values convert, and prints what a table\nmigrate creates would not reproduce.\nExample: migrate validate -p orders.yaml")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	p, err := pf.load()
	if err != nil {
		return err
	}
	cross := p.Source.Engine() != p.Target.Engine()
	var notes map[string][]string
	if p.Unresolved() || cross {
		db, d, err := openDB(ctx, p.Source, dialect.Session{})
		if err != nil {
			return fmt.Errorf("source %s: %w", p.Source, err)
		}
		defer db.Close()
		if err := resolve(ctx, p, db, d); err != nil {
			return err
		}
		if cross {
			if notes, err = checkTypes(ctx, p, db, d); err != nil {
				return err
			}
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
		for _, n := range notes[t.Name] {
			fmt.Fprintf(stdout, "    note, when migrate creates %s: %s\n", t.Target, n)
		}
	}
	for _, w := range p.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return nil
}

// checkTypes checks, for a plan between two engines, that every table's
// columns map to the target engine (the plan's types: included) and that
// their values convert, reading the source's definitions (never the
// target); it returns by table what a target table migrate creates would
// not reproduce (its notes).
func checkTypes(ctx context.Context, p *plans.Plan, db *sql.DB, d dialect.Dialect) (map[string][]string, error) {
	to, err := dialect.For(p.Target.Engine())
	if err != nil {
		return nil, err
	}
	n := len(p.Tables)
	cols, defs := make([][]dialect.Column, n), make([]*dialect.TableDef, n)
	tg := schema.Target{SQL: to, Source: d.Engine(), FenceColumn: p.FenceColumn, Targets: map[string][]string{}}
	for i, t := range p.Tables {
		if cols[i], err = schema.SourceColumns(ctx, db, d, t, p.FenceColumn); err != nil {
			return nil, err
		}
		if defs[i], err = d.ReadTable(ctx, db, t.SourceIdent()); err != nil {
			return nil, fmt.Errorf("source table %s: %w", t.Name, err)
		}
		if err := schema.CheckMax(ctx, db, d, to.Engine(), t, defs[i]); err != nil {
			return nil, err
		}
		tg.Targets[strings.Join(defs[i].Name, ".")] = t.TargetIdent()
	}
	notes := map[string][]string{}
	for i, t := range p.Tables {
		c, err := tg.Creation(t, cols[i], defs[i])
		if err != nil {
			return nil, fmt.Errorf("target table %s: %w", t.Target, err)
		}
		notes[t.Name] = c.Notes
	}
	return notes, nil
}
