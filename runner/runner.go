// Package runner is the orchestration of a run (SPEC §6): setup, then every
// shard of the plan copied as a leased unit of work (hold), then the
// post-load phase (postload), then the verification of each table; and
// repair, the dry run and resume.
package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/metrics"
	"github.com/migrate-dev/migrate/outbox"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/postload"
	"github.com/migrate-dev/migrate/records"
	"github.com/migrate-dev/migrate/stream"
)

// Errors the CLI maps to exit codes (SPEC §4), beside hold.ErrFenced
// (exit 4) and hold.ErrHalted (exit 5).
var (
	// ErrDiff: verification found differences (exit 3).
	ErrDiff = errors.New("verification found differences")
	// ErrInternal: a bug (a panic) stopped a shard (exit 70).
	ErrInternal = errors.New("internal error")
)

// ProgressBar receives row counts as batches commit or rows are verified;
// what names the phase ("copying", "verifying").
type ProgressBar interface {
	Start(what string, total, done int64)
	Add(rows int64)
	Finish()
}

// Options configure a Runner.
type Options struct {
	Instance string // human label
	Owner    string // lease owner id, unique per process start (lock.NewOwnerID)
	NoVerify bool
	Log      *slog.Logger
	Progress ProgressBar      // may be nil
	Metrics  *metrics.Metrics // may be nil
	// Follow starts the plan's change stream before the copy and applies
	// it, after the copy too, until a cutover stops it (Services.Capture).
	Follow bool
	// Deliver: this instance delivers the plan's events to its sinks
	// (Services.Notify) while it runs, as the delivery lease's holder or
	// its standby.
	Deliver bool
	// Parallel caps the shards this instance holds at once, so that other
	// instances of the plan find free shards to take (0: from the cores and
	// the databases' free connections, see defaultParallel).
	Parallel int
}

// Services are what a Runner works with, opened by its caller (the CLI's
// wiring); the Runner owns them from New on, and Close closes them.
type Services struct {
	Source    *sql.DB // nil for status and resume, which read the target only
	SourceSQL dialect.Dialect
	Target    *sql.DB // sessions bounded by the lease (dialect.SessionFor)
	TargetSQL dialect.Dialect
	// OpenScan opens the target pool for whole-table reads, without the
	// lease sessions' statement timeouts; called once, when first needed.
	OpenScan func(context.Context) (*sql.DB, error)
	Locker   *lock.Locker   // the lock service's leases
	Records  *records.Store // takeovers and progress, in the target
	// LockInTarget: the leases are kept in the target database (lock:
	// db), so a target outage takes them away too and is waited out.
	LockInTarget bool
	Fence        *fence.Fence
	Cursor       *cursor.Store
	// Capture is the source's change capture (with Options.Follow).
	Capture stream.Capture
	// Outbox records the run's events in the target (nil: none, as in a
	// dry run); Notify delivers them to the plan's sinks (nil: none).
	Outbox *outbox.Store
	Notify Deliverer
}

// Deliverer delivers the run's events to the plan's sinks
// (*notify.Deliverer).
type Deliverer interface {
	// Run delivers while ctx lasts, holding the plan's delivery lease or
	// waiting for it as a standby.
	Run(ctx context.Context)
	// Kick wakes Run: an event was recorded.
	Kick()
	// Drain waits, up to timeout, until nothing is left to deliver (by
	// this instance or the one holding the delivery lease), and returns
	// how many events are left.
	Drain(ctx context.Context, timeout time.Duration) int
}

// Runner runs one plan.
type Runner struct {
	plan     *plans.Plan
	opts     Options
	log      *slog.Logger
	src      *sql.DB
	dst      *sql.DB
	srcD     dialect.Dialect
	dstD     dialect.Dialect
	openScan func(context.Context) (*sql.DB, error)
	// parallel is the shards held at once at most: opts.Parallel, or its
	// default once Run has chosen it (0 until then).
	parallel int
	scanMu   sync.Mutex
	scan     *sql.DB // target pool without statement timeouts, for verification
	locker   *lock.Locker
	records  *records.Store
	// lockInTarget: Services.LockInTarget.
	lockInTarget bool
	fence        *fence.Fence
	unitFence    hold.Fence // the fence as the units use it
	loop         *hold.Loop // runs the shards and the post-load phase
	steps        postload.Store
	cursor       *cursor.Store
	// srcDefs are the source tables' definitions as setup read them, in
	// the plan's order: the post-load phase's counters come from them.
	srcDefs []*dialect.TableDef

	pace *pace

	capture stream.Capture
	outbox  *outbox.Store
	notify  Deliverer
	// streaming: the plan has a change stream (this run started it, or
	// another did), so the copy's batches are ordered with its
	// transactions (batch.Stream).
	streaming bool

	mu     sync.Mutex // guards report
	report Report
}

// New is a Runner of plan working with svc, its pools sized for
// opts.Parallel.
func New(plan *plans.Plan, opts Options, svc Services) *Runner {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{plan: plan, opts: opts, log: opts.Log, parallel: opts.Parallel,
		src: svc.Source, srcD: svc.SourceSQL, dst: svc.Target, dstD: svc.TargetSQL, openScan: svc.OpenScan,
		locker: svc.Locker, lockInTarget: svc.LockInTarget, records: svc.Records, fence: svc.Fence, cursor: svc.Cursor, capture: svc.Capture,
		outbox: svc.Outbox, notify: svc.Notify}
	r.unitFence = hold.Target{DB: r.dst, SQL: r.dstD, Fence: r.fence}
	r.loop = &hold.Loop{Leases: hold.Locker{Locker: r.locker}, Fence: r.unitFence, Owner: opts.Owner, Log: r.log,
		MaxRetries: plan.MaxRetries, MaxOutage: plan.MaxOutage, Observe: r.observe}
	r.steps = postload.Store{Plan: plan.Name, SQL: r.dstD}
	r.pace = &pace{plan: plan, records: r.records, log: r.log, rates: map[fence.Shard]*rate{}}
	if r.dst != nil {
		r.sizePools()
	}
	return r
}

// sizePools caps an instance's connections to each database: two for each
// shard it may hold at once (--parallel, r.parallel) — a shard writes on one and the
// takeover's checks and cursor reads take another — and two for setup,
// estimates and status. Verification opens its own pool of 4 on the target.
func (r *Runner) sizePools() {
	n := 2*max(r.parallel, 1) + 2
	r.dst.SetMaxOpenConns(n)
	if r.src != nil {
		r.src.SetMaxOpenConns(n)
	}
}

// defaultParallel is --parallel when not given: see parallelFor. A
// database whose connection count cannot be read does not limit it.
func (r *Runner) defaultParallel(ctx context.Context) int {
	shards := 0
	for _, t := range r.plan.Tables {
		shards += t.Shards
	}
	cores := runtime.GOMAXPROCS(0)
	why := []any{"shards", shards, "cores", cores}
	var free []int
	for _, side := range []struct {
		name string
		db   *sql.DB
		d    dialect.Dialect
	}{{"source", r.src, r.srcD}, {"target", r.dst, r.dstD}} {
		var limit, used int
		if err := side.db.QueryRowContext(ctx, side.d.Connections()).Scan(&limit, &used); err != nil {
			r.log.Debug("connection count not readable", "database", side.name, "err", err)
			continue
		}
		free = append(free, limit-used)
		why = append(why, side.name+"_connections_free", limit-used)
	}
	k := parallelFor(shards, cores, free...)
	r.log.Info("shards held at once (--parallel)", append([]any{"parallel", k}, why...)...)
	return k
}

// parallelFor is the default number of shards an instance holds at once:
// the plan's shards, but no more than its cores (at least 2: a shard waits
// on its databases about half of the time), and no more than leaves half of
// each database's free connections to other instances and clients, at
// 2K+6 connections per database (sizePools and verification's scan pool).
// At least 1.
func parallelFor(shards, cores int, free ...int) int {
	k := min(shards, max(2, cores))
	for _, f := range free {
		k = min(k, (f/2-6)/2)
	}
	return max(k, 1)
}

// Ping checks every connection once it can. A database or lock service that
// drops or resets the connection (restarting, failing over, a network
// blip) is tried again with backoff for up to max_outage; one that refuses
// it, or answers with an error, fails at once (a wrong address or
// password is not worth waiting for).
func (r *Runner) Ping(ctx context.Context) error {
	return r.whileUnavailable(ctx, "unavailable at start, retrying", func() error { return r.pingOnce(ctx) })
}

// whileUnavailable is dialect.WhileUnavailable for up to the plan's
// max_outage.
func (r *Runner) whileUnavailable(ctx context.Context, msg string, fn func() error) error {
	return dialect.WhileUnavailable(ctx, r.plan.MaxOutage, r.log, msg, fn)
}

func (r *Runner) pingOnce(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := r.dst.PingContext(pctx); err != nil {
		return fmt.Errorf("target %s: %w", r.plan.Target, err)
	}
	if r.src != nil {
		if err := r.src.PingContext(pctx); err != nil {
			return fmt.Errorf("source %s: %w", r.plan.Source, err)
		}
	}
	if err := r.locker.Ping(pctx); err != nil {
		return fmt.Errorf("lock %s: %w", r.locker, err)
	}
	return nil
}

// Close releases every connection.
func (r *Runner) Close() {
	for _, db := range []*sql.DB{r.src, r.dst, r.scan} {
		if db != nil {
			_ = db.Close()
		}
	}
	if r.locker != nil {
		_ = r.locker.Close()
	}
}

// Run copies every shard of the plan, as holder or standby, until each is
// done by this instance or another, then checks each table.
func (r *Runner) Run(ctx context.Context) (*Report, error) {
	start := time.Now()
	r.report = Report{Plan: r.plan.Name, Instance: r.opts.Instance, Owner: r.opts.Owner, Takeovers: []Takeover{}, Shards: []ShardResult{}, Notes: []string{}, NotMigrated: []string{}}
	var jobs []shardJob
	setup := r.newSetup()
	err := r.whileUnavailable(ctx, "setup interrupted, retrying", func() (err error) {
		jobs, err = setup.run(ctx) // one transaction on PostgreSQL: a retry starts over
		return err
	})
	if err != nil {
		return r.finish(start), err
	}
	r.srcDefs = setup.defs
	defer r.deliver(ctx)() // setup made the outbox's tables
	r.mu.Lock()
	r.report.Notes, r.report.NotMigrated = setup.notes, setup.notCopied
	r.mu.Unlock()
	// Every read of a table's rows, source and target (the takeover's
	// neighbourhood check), knows its columns' types: MySQL reads FLOAT
	// exactly only so.
	for _, j := range jobs {
		r.srcD = dialect.WithColumns(r.srcD, j.spec.Source, j.src)
		r.dstD = dialect.WithColumns(r.dstD, j.spec.Target, j.dst)
	}
	// Starting capture and recording the stream may be done again: an
	// outage in the middle is waited out as setup's is.
	if err := r.whileUnavailable(ctx, "setting up the change stream interrupted, retrying", func() error {
		return r.streamSetup(ctx, jobs)
	}); err != nil {
		return r.finish(start), err
	}
	total, done := r.estimate(ctx, jobs)
	if r.opts.Progress != nil {
		r.opts.Progress.Start("copying", total, done)
		defer r.opts.Progress.Finish()
		r.describe()
	}
	if r.parallel == 0 {
		r.parallel = r.defaultParallel(ctx)
		r.sizePools()
	}
	r.report.Parallel = r.parallel
	r.loop.Slots = make(chan struct{}, r.parallel)
	pctx, stopPublishing := context.WithCancel(ctx)
	defer stopPublishing()
	go r.pace.publish(pctx)
	var wg sync.WaitGroup
	followed := make(chan error, 1)
	if r.opts.Follow {
		go func() { followed <- r.follow(ctx, jobs) }()
	}
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// A bug in one shard's goroutine: end the run with its
				// stack (no DSN is ever in a panic value or a stack)
				// rather than crash every shard's rollback with it.
				if v := recover(); v != nil {
					errs[i] = fmt.Errorf("%w: shard %s: %v\n%s", ErrInternal, j.spec.Shard, v, debug.Stack())
				}
			}()
			errs[i] = r.loop.Run(ctx, j.spec.Shard, r.shardWork(j))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return r.finish(start), err
	}
	if r.opts.Progress != nil {
		r.opts.Progress.Finish()
	}
	if err := r.postLoad(ctx); err != nil {
		return r.finish(start), err
	}
	if r.opts.Follow {
		r.log.Info("the copy is done; applying the change stream until `migrate cutover`")
		if err := <-followed; err != nil {
			return r.finish(start), err
		}
		r.log.Info("the change stream was stopped by a cutover, which verified the tables")
		return r.finish(start), nil
	}
	if r.nothingDone() {
		if r.planEnded(ctx) {
			r.log.Info("every shard was done before this run; nothing to copy or check")
			return r.finish(start), nil
		}
		// The instances that finished the shards stopped before they
		// checked the tables and recorded the plan's end.
		r.log.Info("every shard was done before this run, but the plan's end was not recorded (its last holders stopped before verifying): checking the tables")
	}
	if r.opts.NoVerify {
		r.planDone(ctx, nil)
		return r.finish(start), nil
	}
	v, err := r.Verify(ctx, "")
	if err != nil {
		return r.finish(start), err
	}
	r.report.Verify = v
	r.announceVerified(ctx, v, true)
	if !v.Equal {
		return r.finish(start), ErrDiff
	}
	return r.finish(start), nil
}

// nothingDone reports whether every shard was found done by an earlier run
// or another instance.
func (r *Runner) nothingDone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.report.PostLoad != nil && !r.report.PostLoad.ByOther {
		return false
	}
	for _, s := range r.report.Shards {
		if !s.ByOther {
			return false
		}
	}
	return true
}

func (r *Runner) finish(start time.Time) *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.ElapsedMs = time.Since(start).Milliseconds()
	rep := r.report
	return &rep
}

// estimate returns the expected total rows (source estimates) and the rows
// already done (checkpoints), for the progress bar, and sets each shard's
// backlog: its table's estimate shared evenly, less what it has done.
func (r *Runner) estimate(ctx context.Context, jobs []shardJob) (total, done int64) {
	rows := map[string]int64{}
	left := map[fence.Shard]int64{}
	for _, j := range jobs {
		n, seen := rows[j.table.Name]
		if !seen {
			q, args := r.srcD.EstimateRows(j.spec.Source)
			if err := r.src.QueryRowContext(ctx, q, args...).Scan(&n); err == nil {
				total += n
			}
			rows[j.table.Name] = n
		}
		var did int64
		if cp, err := r.cursor.Read(ctx, r.dst, j.spec.Shard); err == nil {
			did = cp.RowsDone
		}
		done += did
		s := j.spec.Shard
		left[s] = max(n/int64(j.table.Shards)-did, 0)
		r.opts.Metrics.SetBacklog(s.Table, s.Index, left[s])
	}
	tableRows := map[string]int64{}
	for _, j := range jobs {
		tableRows[j.table.Target] = rows[j.table.Name]
	}
	r.pace.setBacklog(left, tableRows)
	return max(total, done), done
}

// copier returns a batch copier reporting into the run's counters.
func (r *Runner) copier() *batch.Copier {
	return &batch.Copier{
		Source: r.src, SourceSQL: r.srcD, Target: r.dst, TargetSQL: r.dstD,
		Fence: r.fence, Cursor: r.cursor, Log: r.log, Stream: r.stream(),
		OnBatch: func(s fence.Shard, p batch.Committed) {
			r.mu.Lock()
			r.report.RowsWritten += p.Rows
			r.report.Batches++
			r.report.ReplayedRows += p.Updated
			r.mu.Unlock()
			left := r.pace.committed(s, p.Rows)
			m := r.opts.Metrics
			m.RowsWritten(s.Table, s.Index, p.Rows)
			m.BatchCommitted(s.Table, s.Index)
			m.CursorMoved(s.Table, s.Index, time.Now())
			m.SetBacklog(s.Table, s.Index, left)
			if r.opts.Progress != nil {
				r.opts.Progress.Add(p.Rows)
			}
			r.log.Debug("batch committed", "shard", s.String(), "rows", p.Rows, "inserted", p.Inserted, "updated", p.Updated, "elapsed", p.Elapsed)
		},
		OnFailure: func(s fence.Shard, _ error) { r.opts.Metrics.BatchFailed(s.Table, s.Index) },
	}
}
