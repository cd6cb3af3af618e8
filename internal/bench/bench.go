// Package bench is the throughput benchmark of issue 6 (`make bench`):
// `migrate run` against the raw tools of each engine, in the same run, on
// the same data, with medians over the runs, ratios to the baselines and a
// verdict on each goal.
//
// It seeds one table of Config.Rows rows (about 250 bytes each) into the
// database bench_src of PostgreSQL and of MariaDB (the same values in both,
// kept between benches when already there with the right row count), then
// Config.Runs times, in alternation, for each direction: the baselines
// (psql's COPY pipe; INTO OUTFILE + LOAD DATA; raw reads and raw bulk loads
// of files made beforehand), then `migrate run` into a fresh database, a
// full replay, `migrate verify` against hashing both tables at once, and
// pgloader; and the fleet table (N instances of `migrate run` over S
// shards). Each `migrate run` is the plan-less form with --no-progress
// --json --no-verify (DSNs in its environment, not argv), a plan name of
// its own, a fresh target database, and its peak RSS from the kernel. It
// runs a copy of bin/migrate taken right after the build, so a rebuild
// meanwhile changes nothing.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The databases of the bench, on the shared servers.
const (
	srcDB   = "bench_src"   // the seeded source, kept between benches
	dstDB   = "bench_dst"   // every target, fresh for each measurement
	scaleDB = "bench_scale" // the source of Config.ScaleRows rows
)

// ErrFailed is the error of a bench in which a measurement (pgloader's
// aside) failed; the report says which and why.
var ErrFailed = errors.New("bench: a measurement failed")

// Bench is one run of the benchmark.
type Bench struct {
	cfg      Config
	svc      *Services
	repo     string    // the module's root, where bin/migrate is built
	progress io.Writer // progress lines (stderr)
	res      *Results

	work     string // this bench's files, removed at the end
	tag      string // names this bench's plans and files
	migrate  string // the copy of bin/migrate that is measured
	buildRev string
	run      int // the current run, from 1
	my       myFiles

	durable        bool // durableOn changed the servers' settings
	flushBefore    int  // MariaDB's innodb_flush_log_at_trx_commit before
	pgloaderBroken bool // pgloader could not be installed
	aptUpdated     bool
	streamBytes    int64 // the change stream's source table, seeded
}

// New prepares a bench of cfg on svc; repo is the module's root.
func New(cfg Config, svc *Services, repo string, progress io.Writer) *Bench {
	return &Bench{cfg: cfg, svc: svc, repo: repo, progress: progress, res: NewResults(),
		tag: fmt.Sprintf("bench-%d", os.Getpid())}
}

// Run measures, writes the report to stdout and cleans up (target
// databases, the plans' Redis keys, bulk files, durability settings; the
// sources stay). Its error is ErrFailed when a measurement failed.
func (b *Bench) Run(ctx context.Context, stdout io.Writer) error {
	t0 := time.Now()
	work, err := os.MkdirTemp("", "bench.")
	if err != nil {
		return err
	}
	b.work = work
	defer b.cleanup(ctx)
	if err := b.measure(ctx); err != nil {
		return err
	}
	rp, err := b.report(ctx)
	if err != nil {
		return err
	}
	if err := rp.Write(stdout); err != nil {
		return err
	}
	d := time.Since(t0).Round(time.Second)
	b.logf("done in %d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
	if b.res.Broken() {
		return ErrFailed
	}
	return nil
}

// measure builds migrate, seeds the sources and makes every measurement.
func (b *Bench) measure(ctx context.Context) error {
	if err := b.needPackage(ctx, timeBin, "time"); err != nil {
		return err
	}
	if err := b.build(ctx); err != nil {
		return err
	}
	if b.cfg.Durable {
		if err := b.durableOn(ctx); err != nil {
			return err
		}
	}
	if !b.cfg.Sections.Alone() || b.cfg.Sections.Fleet() {
		if err := b.seed(ctx, PG, srcDB, b.cfg.Rows); err != nil {
			return err
		}
	}
	if !b.cfg.Sections.Alone() {
		for _, step := range []func(context.Context) error{
			func(ctx context.Context) error { return b.seed(ctx, MY, srcDB, b.cfg.Rows) },
			b.sameData, b.setupMYFiles, b.writeLoadFiles,
		} {
			if err := step(ctx); err != nil {
				return err
			}
		}
	}
	for b.run = 1; b.run <= b.cfg.Runs; b.run++ {
		b.logf("run %d of %d", b.run, b.cfg.Runs)
		if err := b.measureRun(ctx); err != nil {
			return err
		}
	}
	if b.cfg.Scale() {
		return b.scale(ctx)
	}
	return nil
}

// measureRun is one run of every section asked for.
func (b *Bench) measureRun(ctx context.Context) error {
	sec := b.cfg.Sections
	var steps []func() error
	pgloader := func(s Engine) {
		if sec.Extra("pgloader") {
			steps = append(steps, func() error { return b.pgloader(ctx, s) })
		}
	}
	if sec.Dir("pg-pg") {
		steps = append(steps,
			func() error { return b.basePGPipe(ctx, "binary") },
			func() error { return b.basePGPipe(ctx, "text") },
			func() error { return b.basePGBatches(ctx, 1000) },
			func() error { return b.direction(ctx, PG, PG) })
		pgloader(PG)
	}
	if sec.Dir("my-my") {
		steps = append(steps, func() error { return b.baseMYMY(ctx) }, func() error { return b.direction(ctx, MY, MY) })
	}
	for _, d := range []string{"pg-my", "my-pg"} {
		if !sec.Dir(d) {
			continue
		}
		s, t := Ends(d)
		steps = append(steps, func() error { return b.baseRead(ctx, s) }, func() error { return b.baseLoad(ctx, t) },
			func() error { return b.direction(ctx, s, t) })
		if d == "my-pg" {
			pgloader(MY)
		}
	}
	if sec.Fleet() {
		steps = append(steps, func() error { return b.fleetCells(ctx) })
	}
	if sec.Stream() {
		steps = append(steps, func() error { return b.streamRun(ctx) })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil { // a failure recorded meanwhile was the interruption's
			return err
		}
	}
	return nil
}

// scale copies PG->PG once at Config.ScaleRows rows, for its peak RSS.
func (b *Bench) scale(ctx context.Context) error {
	b.run = 1
	if err := b.seed(ctx, PG, scaleDB, b.cfg.ScaleRows); err != nil {
		return err
	}
	b.logf("PG->PG at %d rows, once, for its peak RSS", b.cfg.ScaleRows)
	if err := b.svc.Fresh(ctx, PG, dstDB); err != nil {
		return err
	}
	name := b.tag + "-scale"
	if err := b.delPlanKeys(ctx, name); err != nil {
		return err
	}
	b.migrateRun(ctx, "pg-pg.scale.run", name, PG, PG, scaleDB, b.cfg.ScaleRows)
	return b.delPlanKeys(ctx, name)
}

// build builds bin/migrate and takes the copy that is measured: a rebuild
// of bin/migrate meanwhile (demo.sh, drills.sh) does not swap binaries in
// the middle of the bench.
func (b *Bench) build(ctx context.Context) error {
	b.logf("building bin/migrate")
	bin := filepath.Join(b.repo, "bin", "migrate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/migrate")
	cmd.Dir, cmd.Stdout = b.repo, b.progress
	if err := runTool(cmd); err != nil {
		return fmt.Errorf("build bin/migrate: %w", err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	b.migrate = filepath.Join(b.work, "migrate")
	if err := os.WriteFile(b.migrate, data, 0o755); err != nil {
		return err
	}
	b.buildRev = "unknown"
	if rev, err := b.git(ctx, "rev-parse", "--short", "HEAD"); err == nil {
		b.buildRev = rev
	}
	if st, err := b.git(ctx, "status", "--porcelain", "--", "*.go", "go.mod", "go.sum"); err == nil && st != "" {
		b.buildRev += " + uncommitted Go changes"
	}
	return nil
}

func (b *Bench) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = b.repo
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// cleanup drops the target databases (and the change stream's databases,
// slots and subscriptions) and deletes the plans' Redis keys and the bulk
// files (the sources stay), puts back the durability settings and removes
// the work folder; also when ctx was cancelled.
func (b *Bench) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	b.logf("cleaning up: target databases, plans' Redis keys, bulk files (sources kept)")
	for _, e := range []Engine{PG, MY} {
		if err := b.svc.Drop(ctx, e, dstDB); err != nil {
			b.logf("warning: %v", err)
		}
	}
	if b.cfg.Sections.Stream() {
		if err := b.streamReset(ctx, false); err != nil {
			b.logf("warning: the change stream's databases: %v", b.svc.Redact(err.Error()))
		}
	}
	if err := b.delKeys(ctx, "migrate:{"+b.tag+"-*"); err != nil {
		b.logf("warning: Redis keys of migrate:{%s-*: %v", b.tag, err)
	}
	if b.my.dir != "" {
		files, _ := filepath.Glob(filepath.Join(b.my.dir, b.tag+"-*"))
		for _, f := range files {
			_ = os.Remove(f)
		}
	}
	b.durableOff(ctx)
	_ = os.RemoveAll(b.work)
}

// record adds a measurement of the current run.
func (b *Bench) record(key string, sec float64, rssKB int64) {
	b.res.Record(key, Sample{Run: b.run, Seconds: sec, RSSKB: rssKB})
}

// timed runs fn and records its wall time under key.
func (b *Bench) timed(key string, fn func() error) error {
	t0 := time.Now()
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	sec := seconds(t0)
	b.record(key, sec, 0)
	b.logf("  %s: %.3f s", key, sec)
	return nil
}

// fail records that key could not be measured, without any password.
func (b *Bench) fail(key, reason string) {
	reason = b.svc.Redact(reason)
	b.logf("%s failed: %s", key, reason)
	b.res.Fail(key, reason)
}

// logf writes one progress line.
func (b *Bench) logf(format string, args ...any) {
	fmt.Fprintf(b.progress, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
