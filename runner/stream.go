package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/stream"
	"github.com/migrate-dev/migrate/stream/apply"
)

// startStream starts the plan's change capture at the source, before any
// shard of this run reads a row, and records the stream in the target: at
// the position capture started from, or as it is when another instance or
// an earlier run recorded it. A plan whose copy began without a stream
// cannot have one now: the changes made meanwhile behind the copy's
// cursors are not in any stream.
func (r *Runner) startStream(ctx context.Context, jobs []shardJob) error {
	_, err := apply.Read(ctx, r.dst, r.dstD, r.plan.Name, false)
	if errors.Is(err, apply.ErrNoStream) {
		for _, j := range jobs {
			cp, err := r.cursor.Read(ctx, r.dst, j.spec.Shard)
			if err != nil {
				return err
			}
			if cp.RowsDone > 0 || cp.State == cursor.Done {
				return fmt.Errorf("%w: %s was copied (in part) without --follow: the changes made since are in no stream; start the plan over (drop its target tables and its rows in _migrate_*), or run it without --follow",
					hold.ErrHalted, j.spec.Shard)
			}
		}
	} else if err != nil {
		return err
	}
	var pairs [][2]string
	var units []string
	seen := map[string]bool{}
	for _, j := range jobs {
		if seen[j.table.Target] {
			continue
		}
		seen[j.table.Target] = true
		units = append(units, j.table.Target)
		pair, err := r.sourcePair(ctx, j.spec.Source)
		if err != nil {
			return err
		}
		pairs = append(pairs, pair)
	}
	pos, err := r.capture.Start(ctx, pairs)
	if err != nil {
		return fmt.Errorf("start the change stream at the source: %w", err)
	}
	if err := apply.Init(ctx, r.dst, r.dstD, r.plan.Name, pos, units); err != nil {
		return err
	}
	r.streaming = true
	r.log.Info("change stream started", "pos", pos)
	return nil
}

// streamSetup starts the stream with --follow; without it, a plan whose
// stream another instance runs has its copy ordered with it all the same.
func (r *Runner) streamSetup(ctx context.Context, jobs []shardJob) error {
	if r.opts.Follow {
		return r.startStream(ctx, jobs)
	}
	st, err := apply.Read(ctx, r.dst, r.dstD, r.plan.Name, false)
	if errors.Is(err, apply.ErrNoStream) {
		return nil
	}
	r.streaming = err == nil && st.State != apply.Stopped
	return err
}

// stream is the copy's view of the stream's counts, nil without one.
func (r *Runner) stream() batch.Stream {
	if !r.streaming {
		return nil
	}
	return streamCounts{r}
}

// sourcePair is a source table as its changes name it: [schema, name]; an
// unqualified name is in the source connection's schema (database).
func (r *Runner) sourcePair(ctx context.Context, ident []string) ([2]string, error) {
	if len(ident) == 2 {
		return [2]string{ident[0], ident[1]}, nil
	}
	var schema string
	if err := r.src.QueryRowContext(ctx, r.srcD.StreamSchema()).Scan(&schema); err != nil {
		return [2]string{}, fmt.Errorf("source %s: read its schema: %w", r.plan.Source, err)
	}
	return [2]string{schema, ident[0]}, nil
}

// streamCounts is the stream's per-table counts as the copy reads them
// (batch.Stream).
type streamCounts struct{ r *Runner }

func (s streamCounts) Applied(ctx context.Context, q fence.Tx, table string, lock bool) (int64, error) {
	return apply.AppliedCount(ctx, q, s.r.dstD, s.r.plan.Name, table, lock)
}

var _ batch.Stream = streamCounts{}

// follow runs the plan's change stream as a leased unit (its own loop:
// it does not take one of the shards' slots) until it is stopped.
func (r *Runner) follow(ctx context.Context, jobs []shardJob) error {
	w := &streamWork{r: r, log: r.log.With("unit", apply.Unit(r.plan.Name).String())}
	seen := map[string]bool{}
	for _, j := range jobs {
		if seen[j.table.Target] {
			continue
		}
		seen[j.table.Target] = true
		pair, err := r.sourcePair(ctx, j.spec.Source)
		if err != nil {
			return err
		}
		spec := j.spec
		w.tables = append(w.tables, &apply.Table{Schema: pair[0], Name: pair[1], Unit: j.table.Target, Target: spec.Target,
			Columns: spec.Columns, Key: spec.Key, Convert: spec.Convert, Source: r.copier().Reader(spec)})
	}
	loop := *r.loop
	loop.Slots = nil
	return loop.Run(ctx, apply.Unit(r.plan.Name), w)
}

// streamWork is the change stream's applier as a unit of work (hold.Work).
type streamWork struct {
	r      *Runner
	tables []*apply.Table
	st     apply.State
	log    *slog.Logger
}

// state is the stream's state as a unit's.
func streamFound(st apply.State) hold.Found {
	f := hold.Found{State: cursor.Running, UpdatedAt: st.AppliedAt}
	if st.State == apply.Stopped {
		f.State = cursor.Done
	}
	return f
}

func (w *streamWork) Look(ctx context.Context) (hold.Found, error) {
	st, err := apply.Read(ctx, w.r.dst, w.r.dstD, w.r.plan.Name, false)
	return streamFound(st), err
}

func (w *streamWork) Resume(ctx context.Context, tx *sql.Tx, _ hold.Lease) (hold.Found, error) {
	st, err := apply.Read(ctx, tx, w.r.dstD, w.r.plan.Name, true)
	w.st = st
	return streamFound(st), err
}

func (w *streamWork) Halted() error {
	return fmt.Errorf("%w: the change stream of %s is halted", hold.ErrHalted, w.r.plan.Name)
}

// Run applies the stream from the position the claim read.
func (w *streamWork) Run(ctx context.Context, c *hold.Claim) error {
	r := w.r
	lctx := c.Lease.Context()
	if err := w.retention(lctx, w.st.Pos); err != nil {
		return err
	}
	rd, err := r.capture.Open(lctx, w.st.Pos)
	if errors.Is(err, stream.ErrGone) {
		return fmt.Errorf("%w: %w (from %s): the tables must be copied again", hold.ErrHalted, err, w.st.Pos)
	}
	if err != nil {
		return fmt.Errorf("open the change stream at %s: %w", w.st.Pos, err)
	}
	defer func() { _ = rd.Close() }()
	w.log.Info("applying the change stream", "from", w.st.Pos, "token", c.Lease.Token())
	var logged time.Time
	a := &apply.Applier{Target: r.dst, SQL: r.dstD, Fence: r.fence, Unit: c.Unit, FenceColumn: r.plan.FenceColumn,
		Tables: w.tables, MaxChanges: r.plan.BatchSize, MaxWait: 20 * time.Millisecond,
		DurableEvery: durableEvery, MaxRetries: r.plan.MaxRetries, MaxOutage: r.plan.MaxOutage, Log: w.log,
		OnApply: func(a apply.Applied) {
			r.opts.Metrics.StreamApplied(a.Txs, a.Changes, a.Lag.Seconds, a.Lag.Bytes)
			if time.Since(logged) >= 10*time.Second {
				logged = time.Now()
				w.log.Info("change stream", "pos", a.Pos, "lag_seconds", a.Lag.Seconds, "lag_bytes", a.Lag.Bytes)
			}
		}}
	wctx, stopWatch := context.WithCancelCause(ctx)
	defer stopWatch(nil)
	go w.watchRetention(wctx, stopWatch)
	err = a.Run(wctx, c.Lease, rd)
	if cause := context.Cause(wctx); errors.Is(cause, hold.ErrHalted) {
		return cause
	}
	if errors.Is(err, apply.ErrStopped) {
		w.log.Info("change stream stopped")
		return nil
	}
	return err
}

// durableEvery is how often the applier's commit waits for the disk on a
// target that lets the others not wait (apply.Applier.DurableEvery): the
// source frees its log that often.
const durableEvery = 250 * time.Millisecond

// RetentionEvery is how often the applier looks at how much log the source
// keeps for the stream.
const RetentionEvery = 10 * time.Second

// watchRetention checks the stream's retention every RetentionEvery and
// stops the applier (stop, with the halting error as cause) when it fails.
func (w *streamWork) watchRetention(ctx context.Context, stop context.CancelCauseFunc) {
	t := time.NewTicker(RetentionEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := apply.Read(ctx, w.r.dst, w.r.dstD, w.r.plan.Name, false)
		if err != nil {
			continue
		}
		if err := w.retention(ctx, st.Pos); err != nil {
			// A cutover stops the stream, then drops the slot: the slot
			// gone once the stream stopped is the cutover's, not a halt
			// (the applier sees the stop at its next transaction).
			if st, rerr := apply.Read(ctx, w.r.dst, w.r.dstD, w.r.plan.Name, false); rerr == nil && st.State == apply.Stopped {
				return
			}
			stop(err)
			return
		}
	}
}

// retention is a hold.ErrHalted error when the source no longer has the
// stream's position pos, or keeps more of its log for the stream than the
// plan's max_retained_log_mb.
func (w *streamWork) retention(ctx context.Context, pos stream.Pos) error {
	r := w.r
	n, ok, err := r.capture.Retained(ctx, pos)
	switch {
	case err != nil:
		w.log.Warn("how much log the source keeps for the stream is not known", "err", err)
	case !ok:
		return fmt.Errorf("%w: %w (the stream's position %s): the tables must be copied again; `migrate abandon` drops what is left of the stream", hold.ErrHalted, stream.ErrGone, pos)
	case r.plan.MaxRetainedLogMB > 0 && n > int64(r.plan.MaxRetainedLogMB)<<20:
		return fmt.Errorf("%w: the source keeps %d MiB of its log for the change stream, more than max_retained_log_mb %d: the stream is halted before it fills the source's disk; let it catch up (raise the cap and run again) or give it up with `migrate abandon` (the slot is dropped; the tables must then be copied again)",
			hold.ErrHalted, n>>20, r.plan.MaxRetainedLogMB)
	}
	return nil
}
