// Command bench is the throughput benchmark behind `make bench`: it builds
// bin/migrate, seeds the sources and measures `migrate run` against each
// engine's own bulk tools on the servers of scripts/services.sh, and prints
// the report (medians, ratios, goals with MET / NOT MET) on stdout;
// progress goes to stderr. See package internal/bench.
//
// Every flag has an environment fallback, the knobs of `make bench`
// (BENCH_ROWS, …); the servers come from MIGRATE_TEST_PG, MIGRATE_TEST_MYSQL
// and MIGRATE_TEST_REDIS, as `eval "$(scripts/services.sh start)"` sets them.
//
// Exit codes: 0 every measurement made; 1 a measurement failed (pgloader
// aside) or the bench could not run; 2 a flag or variable is invalid.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/migrate-dev/migrate/internal/bench"
)

const usage = `bench measures migrate run against each engine's own bulk tools, in the
same run and on the same data, and prints the medians, the ratios and each goal
of issue 6 with MET / NOT MET (make bench; see internal/bench).

Usage:
  scripts/bench.sh [flags]        starts the services, then runs this command
  BENCH_ROWS=100000 BENCH_RUNS=1 make bench

Every flag falls back to its BENCH_* variable. The servers come from
MIGRATE_TEST_PG, MIGRATE_TEST_MYSQL and MIGRATE_TEST_REDIS, as
eval "$(scripts/services.sh start)" sets them. Exit codes: 0 every measurement
made, 1 a measurement failed (pgloader aside) or the bench could not run,
2 an invalid flag or variable.

Flags:
`

const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\ntry: scripts/bench.sh -h\n", err)
		return exitUsage
	}
	svc, err := bench.OpenServices(ctx, os.Getenv("MIGRATE_TEST_PG"), os.Getenv("MIGRATE_TEST_MYSQL"), os.Getenv("MIGRATE_TEST_REDIS"))
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\ntry: make bench, or eval \"$(scripts/services.sh start)\" first\n", err)
		return exitFailed
	}
	defer svc.Close()
	repo, err := moduleRoot(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitFailed
	}
	if err := bench.New(cfg, svc, repo, stderr).Run(ctx, stdout); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "bench: interrupted")
		} else if !errors.Is(err, bench.ErrFailed) {
			fmt.Fprintf(stderr, "bench: error: %s\n", svc.Redact(err.Error()))
		}
		return exitFailed
	}
	return exitOK
}

// env is the value of variable name, or def when it is not set.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// parseFlags reads the flags, whose defaults come from the BENCH_*
// variables.
func parseFlags(args []string, stderr io.Writer) (bench.Config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	rows := fs.String("rows", env("BENCH_ROWS", "1000000"), "rows of the seeded table, >= 1000; env BENCH_ROWS")
	runs := fs.String("runs", env("BENCH_RUNS", "3"), "runs, in alternation; the report gives medians; env BENCH_RUNS")
	only := fs.String("only", env("BENCH_ONLY", ""), "comma-separated directions ("+strings.Join(bench.Directions, ", ")+
		") and extras ("+strings.Join(bench.Extras, ", ")+"); listed directions run with the listed extras, none listed means all; fleet and stream listed alone run only themselves; env BENCH_ONLY")
	scale := fs.String("scale-rows", env("BENCH_SCALE_ROWS", ""), "also copy PG->PG once at this many rows (database bench_scale), for its peak RSS; env BENCH_SCALE_ROWS")
	durable := fs.String("durable", env("BENCH_DURABLE", "1"), "1: fsync, synchronous_commit, full_page_writes and innodb_flush_log_at_trx_commit=1 on the whole servers for the length of the bench; 0: services.sh's fast settings; env BENCH_DURABLE")
	fleet := fs.String("fleet", env("BENCH_FLEET", ""), "1: add the fleet table to a full bench; env BENCH_FLEET")
	shards := fs.String("fleet-shards", env("BENCH_FLEET_SHARDS", "1 2 4"), "the fleet's shard counts; env BENCH_FLEET_SHARDS")
	instances := fs.String("fleet-instances", env("BENCH_FLEET_INSTANCES", "1 2 3"), "the fleet's instance counts; env BENCH_FLEET_INSTANCES")
	ttl := fs.String("fleet-ttl", env("BENCH_FLEET_TTL", "30s"), "the fleet plan's lease_ttl; env BENCH_FLEET_TTL")
	streamRows := fs.String("stream-rows", env("BENCH_STREAM_ROWS", "100000"), "the change stream's table (database bench_stream_src), >= 1000 rows; env BENCH_STREAM_ROWS")
	streamChanges := fs.String("stream-changes", env("BENCH_STREAM_CHANGES", "200000"), "row changes applied by each measurement of the change stream (40% updates, 30% inserts, 30% deletes, 10 per source transaction), >= 1000; env BENCH_STREAM_CHANGES")
	if err := fs.Parse(args); err != nil {
		return bench.Config{}, err
	}
	if fs.NArg() > 0 {
		return bench.Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := bench.Config{FleetTTL: *ttl}
	var errs []error
	num := func(name, s string, dst *int) {
		if s == "" {
			return
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("-%s: %q is not a number", name, s))
		}
		*dst = n
	}
	num("rows (BENCH_ROWS)", *rows, &cfg.Rows)
	num("runs (BENCH_RUNS)", *runs, &cfg.Runs)
	num("scale-rows (BENCH_SCALE_ROWS)", *scale, &cfg.ScaleRows)
	num("stream-rows (BENCH_STREAM_ROWS)", *streamRows, &cfg.StreamRows)
	num("stream-changes (BENCH_STREAM_CHANGES)", *streamChanges, &cfg.StreamChanges)
	var fleetOn bool
	for _, sw := range []struct {
		name, v string
		dst     *bool
	}{{"durable (BENCH_DURABLE)", *durable, &cfg.Durable}, {"fleet (BENCH_FLEET)", *fleet, &fleetOn}} {
		on, err := strconv.ParseBool(or(sw.v, "0"))
		if err != nil {
			errs = append(errs, fmt.Errorf("-%s: %q is not 0 or 1", sw.name, sw.v))
		}
		*sw.dst = on
	}
	var err error
	if cfg.Sections, err = bench.ParseSections(*only, fleetOn); err != nil {
		errs = append(errs, err)
	}
	var errShards, errInstances error
	cfg.FleetShards, errShards = bench.ParseCounts("BENCH_FLEET_SHARDS", *shards)
	cfg.FleetInstances, errInstances = bench.ParseCounts("BENCH_FLEET_INSTANCES", *instances)
	if cfg.Sections.Fleet() {
		errs = append(errs, errShards, errInstances)
	}
	if err := errors.Join(errs...); err != nil {
		return bench.Config{}, err
	}
	return cfg, cfg.Validate()
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// moduleRoot is the folder of go.mod, where bin/migrate is built.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", errors.New("run from inside the migrate module (go env GOMOD finds no go.mod)")
	}
	return filepath.Dir(mod), nil
}
