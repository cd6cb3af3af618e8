package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/migrate-dev/migrate/plans"
)

// planFlags are the flags every command shares: the plan file, or the
// plan-less one-table form. Environment fallbacks: MIGRATE_PLAN,
// MIGRATE_SOURCE, MIGRATE_TARGET, MIGRATE_REDIS.
type planFlags struct {
	path    string
	o       plans.Overrides
	verbose bool
}

func (pf *planFlags) register(fs *flag.FlagSet) {
	for _, n := range []string{"p", "plan"} {
		fs.StringVar(&pf.path, n, os.Getenv("MIGRATE_PLAN"), "plan file (YAML); env MIGRATE_PLAN")
	}
	fs.StringVar(&pf.o.Source, "source", os.Getenv("MIGRATE_SOURCE"), "source DSN (overrides the plan); env MIGRATE_SOURCE")
	fs.StringVar(&pf.o.Target, "target", os.Getenv("MIGRATE_TARGET"), "target DSN (overrides the plan); env MIGRATE_TARGET")
	fs.StringVar(&pf.o.Redis, "redis", os.Getenv("MIGRATE_REDIS"), "Redis URL (overrides the plan); env MIGRATE_REDIS")
	fs.StringVar(&pf.o.Name, "name", "", "plan name (plan-less form; default from the table)")
	fs.StringVar(&pf.o.Table, "table", "", "source table (plan-less form), or the one plan table to use")
	fs.StringVar(&pf.o.TargetTable, "target-table", "", "target table name (default: the source table's)")
	fs.StringVar(&pf.o.Key, "key", "", "business key columns, comma-separated")
	fs.StringVar(&pf.o.Columns, "columns", "", "copied columns, comma-separated (default: all)")
	fs.IntVar(&pf.o.Shards, "shards", 0, "key ranges, each with its own lease (default 1)")
	fs.IntVar(&pf.o.BatchSize, "batch-size", 0, "rows per batch (default 1000)")
	fs.DurationVar(&pf.o.LeaseTTL, "lease-ttl", 0, "lease TTL, e.g. 30s")
	fs.BoolVar(&pf.verbose, "v", false, "debug logging")
}

func (pf *planFlags) load() (*plans.Plan, error) {
	if pf.path != "" {
		p, err := plans.LoadWith(pf.path, os.LookupEnv, pf.o)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, usageError{fmt.Sprintf("plan file %s does not exist", pf.path)}
		}
		return p, err
	}
	if pf.o.Table == "" {
		return nil, usageError{"no plan: give -p PLAN, or --source, --target, --redis, --table and --key"}
	}
	return plans.FromFlags(pf.o)
}

func (pf *planFlags) logger(stderr io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if pf.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// parse parses a command's flags; leftover arguments are a usage error.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}
