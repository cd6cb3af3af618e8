package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/schema"
)

// validateCmd is `migrate validate`: parse and check a plan; read the
// target's existing tables (checkTargets), and the source when the plan's
// tables or keys are to be found in it, or its types checked against the
// other engine's; never write.
func validateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	follow := fs.Bool("follow", false, "also check that the source can stream its changes (run --follow): logical replication or a ROW binlog, keys, privileges, retention")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate validate -p PLAN [--follow]\n\nChecks the plan file (errors name file:line:column), then the keys' collations of\nthe target tables that exist (read only; a target it cannot reach is skipped\nwith a warning). When the plan discovers its tables (no tables list, or\ninclude/exclude) or leaves a key out, it reads the source's catalog and prints\nthe tables found and, between two databases of one engine, the views, routines\nand triggers the post-load phase creates; or copies between engines: then it\nreads the source's table definitions, checks that every column's type maps and\nits values convert, and prints what a table migrate creates would not reproduce.\nExample: migrate validate -p orders.yaml")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	p, err := pf.load()
	if err != nil {
		return err
	}
	var src *sql.DB
	var srcSQL dialect.Dialect
	var objs *schema.Objects
	cross := p.Source.Engine() != p.Target.Engine()
	var notes map[string][]string
	if p.Unresolved() || cross {
		if src, srcSQL, err = openDB(ctx, p.Source, dialect.Session{}); err != nil {
			return fmt.Errorf("source %s: %w", p.Source, err)
		}
		defer src.Close()
		if err := resolve(ctx, p, src, srcSQL); err != nil {
			return err
		}
		if objs, err = sameEngineObjects(ctx, p, src, srcSQL); err != nil {
			return err
		}
		if cross {
			if notes, err = checkTypes(ctx, p, src, srcSQL); err != nil {
				return err
			}
		}
	}
	if err := checkTargets(ctx, p, src, srcSQL, stderr); err != nil {
		return err
	}
	if *follow {
		if err := checkFollow(ctx, p); err != nil {
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
		for _, n := range notes[t.Name] {
			fmt.Fprintf(stdout, "    note, when migrate creates %s: %s\n", t.Target, n)
		}
	}
	if objs != nil {
		for _, st := range objs.Steps {
			fmt.Fprintf(stdout, "  post-load creates %s %s\n", st.Kind, st.Name)
		}
		for _, o := range objs.Reported {
			fmt.Fprintf(stdout, "  post-load does not create %s %s: %s\n", o.Kind, o.Name, o.Note)
		}
	}
	for _, s := range p.Notify {
		events := "every event"
		if len(s.Events) > 0 {
			events = strings.Join(s.Events, ", ")
		}
		fmt.Fprintf(stdout, "  notify %s (%s): %s\n", s.Name, s.Kind(), events)
	}
	for _, w := range p.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return nil
}

// targetCheckTimeout bounds validate's reading of the target.
const targetCheckTimeout = 10 * time.Second

// checkTargets refuses a plan whose existing target table has a key column
// that could make distinct source keys one row (schema.Target.KeyCollations),
// as run's setup does, reading the target and the source (src when
// validate opened it already) and writing neither. A database it cannot
// read is warned about and the check skipped: run checks again before it
// writes anything.
func checkTargets(ctx context.Context, p *plans.Plan, src *sql.DB, srcSQL dialect.Dialect, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, targetCheckTimeout)
	defer cancel()
	skip := func(what string) error {
		fmt.Fprintf(stderr, "warning: the %s could not be read: the key collations of existing target tables are not checked (run checks them before it writes)\n", what)
		return nil
	}
	db, d, err := openDB(ctx, p.Target, dialect.Session{})
	if err != nil {
		return skip("target")
	}
	defer db.Close()
	if src == nil {
		if src, srcSQL, err = openDB(ctx, p.Source, dialect.Session{}); err != nil {
			return skip("source")
		}
		defer src.Close()
	}
	tg := schema.Target{SQL: d, Source: p.Source.Engine(), FenceColumn: p.FenceColumn}
	if tg.Source == d.Engine() {
		tg.SourceDB, tg.SourceSQL = src, srcSQL
	}
	for _, t := range p.Tables {
		cols, err := schema.Columns(ctx, src, srcSQL, t.SourceIdent())
		if errors.Is(err, schema.ErrNoTable) {
			continue // run says so
		}
		if err == nil {
			err = tg.KeyCollations(ctx, db, t, cols)
		}
		if errors.Is(err, plans.ErrInvalid) {
			return err
		}
		if err != nil {
			return skip("table " + t.Name)
		}
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
