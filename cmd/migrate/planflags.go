package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/migrate-dev/migrate/plans"
)

// planFlags are the flags every command shares: the plan file, or the
// plan-less one-table form. Environment fallbacks: MIGRATE_PLAN,
// MIGRATE_SOURCE, MIGRATE_TARGET, MIGRATE_LOCK, MIGRATE_REDIS.
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
	fs.StringVar(&pf.o.Lock, "lock", os.Getenv("MIGRATE_LOCK"), "lock service that grants the leases (overrides the plan): db (the target database, the default), redis://…, etcd://h1:2379,h2:2379/prefix, zk://h1:2181/prefix, or a postgres:// or mysql:// database; env MIGRATE_LOCK")
	fs.StringVar(&pf.o.Redis, "redis", os.Getenv("MIGRATE_REDIS"), "Redis URL: --lock redis://… (overrides the plan); env MIGRATE_REDIS")
	fs.StringVar(&pf.o.Name, "name", "", "plan name (plan-less form; default from the table)")
	fs.StringVar(&pf.o.Table, "table", "", "source table (plan-less form), or the one plan table to use")
	fs.StringVar(&pf.o.TargetTable, "target-table", "", "target table name (default: the source table's)")
	fs.StringVar(&pf.o.Key, "key", "", "business key columns, comma-separated (default: the primary key)")
	fs.StringVar(&pf.o.Include, "include", "", "copy every source table matching these globs, comma-separated (\"public.*\", \"audit_*\")")
	fs.StringVar(&pf.o.Exclude, "exclude", "", "leave out the tables matching these globs, comma-separated")
	fs.StringVar(&pf.o.Columns, "columns", "", "copied columns, comma-separated (default: all)")
	fs.IntVar(&pf.o.Shards, "shards", 0, "key ranges, each with its own lease (default: auto, one per 250,000 rows, at most two per core)")
	fs.IntVar(&pf.o.BatchSize, "batch-size", 0, "rows per batch (default 1000)")
	fs.DurationVar(&pf.o.LeaseTTL, "lease-ttl", 0, "lease TTL, e.g. 30s")
	fs.BoolVar(&pf.verbose, "v", false, "debug logging")
}

func (pf *planFlags) load() (*plans.Plan, error) {
	for _, s := range []string{pf.o.Source, pf.o.Target, pf.o.Redis, pf.o.Lock} {
		if d, err := plans.ParseDSN(s); err == nil {
			rememberPasswords(d)
		}
	}
	p, err := pf.loadPlan()
	if p != nil {
		rememberPasswords(p.Source, p.Target, p.Lock)
	}
	return p, err
}

func (pf *planFlags) loadPlan() (*plans.Plan, error) {
	if pf.path != "" {
		p, err := plans.LoadWith(pf.path, os.LookupEnv, pf.o)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, usageError{fmt.Sprintf("plan file %s does not exist", pf.path)}
		}
		return p, err
	}
	if pf.o.Table == "" && pf.o.Include == "" && pf.o.Exclude == "" {
		return nil, usageError{"no plan: give -p PLAN, or --source, --target and --table (or --include to copy every table that matches); --lock URL for a lock service other than the target database"}
	}
	return plans.FromFlags(pf.o)
}

// knownPasswords are the passwords of every DSN this process has loaded,
// for scrubbing what cannot go through plans.DSN's redacted printing: the
// report of a panic (see guard in main.go).
var knownPasswords struct {
	sync.Mutex
	list []string
}

func rememberPasswords(ds ...plans.DSN) {
	knownPasswords.Lock()
	defer knownPasswords.Unlock()
	for _, d := range ds {
		if pw := d.Password(); pw != "" && !slices.Contains(knownPasswords.list, pw) {
			knownPasswords.list = append(knownPasswords.list, pw)
		}
	}
}

func passwordsKnown() []string {
	knownPasswords.Lock()
	defer knownPasswords.Unlock()
	return append([]string(nil), knownPasswords.list...)
}

// dsnFlags are the flags that take a DSN, with the environment variable
// that can carry it instead.
var dsnFlags = []struct{ name, env string }{
	{"source", "MIGRATE_SOURCE"}, {"target", "MIGRATE_TARGET"}, {"lock", "MIGRATE_LOCK"}, {"redis", "MIGRATE_REDIS"},
}

// argvPasswords returns the DSN flags in args (the command line after the
// command name, as the flag package reads it: -name VALUE, --name VALUE,
// -name=VALUE, --name=VALUE; up to a "--") whose value holds a password.
// Those are readable by any user of the machine (ps, /proc/PID/cmdline).
func argvPasswords(args []string) []string {
	var found []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name := strings.TrimPrefix(a[1:], "-")
		name, value, hasValue := strings.Cut(name, "=")
		for _, f := range dsnFlags {
			if name != f.name {
				continue
			}
			if !hasValue {
				if i+1 >= len(args) {
					break
				}
				i++
				value = args[i]
			}
			if hasPassword(value) && !slices.Contains(found, f.name) {
				found = append(found, f.name)
			}
		}
	}
	return found
}

// hasPassword reports whether a DSN holds a password; a value that does not
// parse counts when it could hold credentials (user:pass@...).
func hasPassword(dsn string) bool {
	if d, err := plans.ParseDSN(dsn); err == nil {
		return d.Password() != ""
	}
	return strings.Contains(dsn, "@") || strings.Contains(strings.ToLower(dsn), "pass")
}

// warnArgvPasswords writes one warning to stderr when DSN flags on the
// command line hold passwords, naming the flags, never their values.
func warnArgvPasswords(args []string, stderr io.Writer) {
	found := argvPasswords(args)
	if len(found) == 0 {
		return
	}
	var flags, envs []string
	for _, name := range found {
		for _, f := range dsnFlags {
			if f.name == name {
				flags, envs = append(flags, "--"+f.name), append(envs, f.env)
			}
		}
	}
	fmt.Fprintf(stderr, "migrate: warning: the password given with %s on the command line can be read by every user of this machine (ps, /proc/PID/cmdline); "+
		"set %s in the environment instead, or use a plan file (-p PLAN, with ${VAR} for the DSNs)\n",
		strings.Join(flags, ", "), strings.Join(envs, ", "))
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
