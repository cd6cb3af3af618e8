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
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
)

// shardWork is one shard's copy as a leased unit of work (hold.Work): its
// job, the checkpoint its claim read, and the takeover it is, if any.
type shardWork struct {
	r   *Runner
	j   shardJob
	cp  cursor.Checkpoint
	log *slog.Logger
	tk  *Takeover // nil when the shard had no live previous holder
}

func (r *Runner) shardWork(j shardJob) *shardWork {
	return &shardWork{r: r, j: j, log: r.log.With("shard", j.spec.Shard.String())}
}

// Look reads the shard's checkpoint.
func (w *shardWork) Look(ctx context.Context) (hold.Found, error) {
	cp, err := w.r.cursor.Read(ctx, w.r.dst, w.j.spec.Shard)
	return found(cp), err
}

// Resume reads the checkpoint in the claim's transaction.
func (w *shardWork) Resume(ctx context.Context, tx *sql.Tx, _ hold.Lease) (hold.Found, error) {
	cp, err := w.r.cursor.ReadForUpdate(ctx, tx, w.j.spec.Shard)
	w.cp = cp
	return found(cp), err
}

// found is a checkpoint as a unit's state.
func found(cp cursor.Checkpoint) hold.Found {
	return hold.Found{State: cp.State, UpdatedAt: cp.UpdatedAt, Token: int64(cp.Token)}
}

// fenceToken is the lease's token as the fence's.
func fenceToken(l hold.Lease) fence.Token { return fence.Token(l.Token()) }

// Halted is the error of the shard found halted.
func (w *shardWork) Halted() error {
	return fmt.Errorf("%w: %s is halted; see `migrate status`, then `migrate resume`", hold.ErrHalted, w.j.spec.Shard)
}

// Run does the work of a claimed shard: record the takeover (if it is
// one), copy from the checkpoint, and finish.
func (w *shardWork) Run(ctx context.Context, c *hold.Claim) error {
	w.log = w.r.log.With("shard", c.Unit.String(), "token", c.Lease.Token())
	if c.TakenOver() {
		w.r.announced("shard.taken_over") // recorded by the claim (TakenOver), which committed
	}
	if err := w.beginTakeover(c); err != nil {
		return err
	}
	w.r.pace.start(c.Unit, c.Lease)
	defer w.r.pace.stop(c.Unit)
	res, err := w.copy(ctx, c)
	return w.finish(c, res, err)
}

// copy copies the shard from its checkpoint; a takeover checks the
// neighbourhood of the resume point (the last committed batch before it,
// and the first new batch) and completes its record.
func (w *shardWork) copy(ctx context.Context, c *hold.Claim) (batch.Result, error) {
	r, j, cp, lctx := w.r, w.j, w.cp, c.Lease.Context()
	spec := j.spec
	spec.Range = dialect.Range{Lo: cp.Lo, Hi: cp.Hi}
	spec.MaxOutage = r.plan.MaxOutage
	copier := r.copier()
	copier.SchemaCheck = w.sourceChanged
	var check neighbourhood
	noted := false
	note := func() { // the takeover's RTO is known once the first new batch is checked
		if w.tk != nil && !noted {
			noted = true
			w.noteTakeover(lctx, spec.Shard, check)
		}
	}
	if w.tk != nil && cp.LastKey != nil {
		check = w.checkNeighbourhood(lctx, spec, cp.LastKey, nil)
		copier.AfterFirst = func(rows [][]any) {
			first := w.checkNeighbourhood(lctx, spec, nil, rows)
			check.rows, check.diffs, check.took = check.rows+first.rows, check.diffs+first.diffs, check.took+first.took
			note()
		}
	}
	res, err := copier.Copy(ctx, spec, c.Lease, cp)
	if w.tk != nil {
		note()
		w.tk.ReplayedRows = res.Updated
		r.addTakeover(*w.tk)
	}
	return res, err
}

// finish records the end of the copy: done, taken again (the target lost
// committed batches), halted, or stopped (the loop tells fenced from
// failed).
func (w *shardWork) finish(c *hold.Claim, res batch.Result, err error) error {
	r, j, s := w.r, w.j, c.Unit
	m := r.opts.Metrics
	result := ShardResult{Table: j.table.Name, Target: j.table.Target, Shard: s.Index, State: string(cursor.Running), Token: c.Lease.Token(), Rows: res.Rows, Batches: res.Batches}
	if err == nil {
		done := shardDone{shardEvent: w.event(c.Lease.Token()), RowsDone: w.cp.RowsDone + res.Rows}
		err = w.setState(c, cursor.Done, "shard.done", done)
	}
	switch {
	case errors.Is(err, cursor.ErrMoved) && c.Lease.Context().Err() == nil:
		// The target lost batches it had committed: give the lease back
		// and take the shard again, from the cursor the target has.
		w.log.Warn("the target lost committed batches (a crash without durable commits, or a failover to a lagging replica); resuming from its cursor", "err", err)
		return hold.Again(err)
	case errors.Is(err, hold.ErrHalted):
		if w.tk != nil {
			m.RecoveryFailed(s.Table, s.Index)
		}
		if w.halt(c, err) {
			result.State = string(cursor.Halted)
		}
		r.addShard(result)
		return err
	case err != nil:
		r.addShard(result)
		return err
	}
	r.announced("shard.done")
	w.log.Info("shard done", "rows", res.Rows, "batches", res.Batches, "replayed", res.Updated, "ms_per_batch", res.Profile.PerBatch())
	m.SetState(s.Table, s.Index, string(cursor.Done))
	result.State = string(cursor.Done)
	r.addShard(result)
	r.describe()
	return nil
}

// setState records the shard's state and the event typ that reports it,
// in one transaction fenced like a batch.
func (w *shardWork) setState(c *hold.Claim, st cursor.State, typ string, data any) error {
	r, s := w.r, c.Unit
	return r.unitFence.Do(c.Lease, s, func(ctx context.Context, tx *sql.Tx) error {
		if err := r.cursor.SetState(ctx, tx, s, st, fenceToken(c.Lease)); err != nil {
			return err
		}
		return r.announce(ctx, tx, typ, data, s.Table, s.Index, c.Lease.Token())
	})
}

// halt records the shard halted by cause, so no instance resumes it
// automatically, and reports whether it could.
func (w *shardWork) halt(c *hold.Claim, cause error) bool {
	r, s := w.r, c.Unit
	resume := r.resumeCommand(w.j.table.Name, s.Index)
	ev := shardHalted{shardEvent: w.event(c.Lease.Token()), Reason: reason(cause), ResumeCommand: resume}
	if err := w.setState(c, cursor.Halted, "shard.halted", ev); err != nil {
		w.log.Error("could not record the shard halted", "err", err)
		return false
	}
	r.announced("shard.halted")
	w.log.Error("shard halted: automatic recovery gave up; fix the cause, then resume it", "cause", cause, "resume", resume)
	r.opts.Metrics.Halted(s.Table, s.Index)
	return true
}

// addShard and addTakeover add to the run's report.
func (r *Runner) addShard(s ShardResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.Shards = append(r.report.Shards, s)
}

func (r *Runner) addTakeover(t Takeover) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.Takeovers = append(r.report.Takeovers, t)
}

// observe keeps the run's report and metrics from the events of its
// units.
func (r *Runner) observe(e hold.Event) {
	m, s := r.opts.Metrics, e.Unit
	shard := s.Index >= 0 // not the post-load phase
	switch e.Kind {
	case hold.Standby:
		if shard {
			m.SetState(s.Table, s.Index, "standby")
		} else {
			r.log.Info("the post-load phase is held by another instance; waiting as its standby", "holder", e.Owner)
		}
	case hold.Claimed:
		if shard {
			m.SetState(s.Table, s.Index, string(cursor.Running))
			m.SetToken(s.Table, s.Index, e.Token)
			m.CursorMoved(s.Table, s.Index, time.Now())
		}
	case hold.Done, hold.Halted:
		if shard && e.ByOther {
			state := cursor.Done
			if e.Kind == hold.Halted {
				state = cursor.Halted
			}
			m.SetState(s.Table, s.Index, string(state))
			if t, ok := r.plan.ByTarget(s.Table); ok && state == cursor.Done {
				r.addShard(ShardResult{Table: t.Name, Target: t.Target, Shard: s.Index, State: string(state), Token: e.Token, ByOther: true})
				r.describe()
			}
		}
	case hold.Fenced:
		if e.Stale {
			r.mu.Lock()
			r.report.StaleRejections++
			r.mu.Unlock()
			m.StaleRejected(s.Table, s.Index)
		} else {
			m.SelfFenced(s.Table, s.Index)
		}
	case hold.RecoveryFailed:
		m.RecoveryFailed(s.Table, s.Index)
	}
}
