package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/lock"
)

// holding is a claimed shard being worked: its job, claim and log, and the
// takeover it is, if any.
type holding struct {
	r   *Runner
	j   shardJob
	c   *claim
	log *slog.Logger
	tk  *Takeover // nil when the shard had no live previous holder
}

// run does the work of a claimed shard: record the takeover (if it is
// one), copy from the checkpoint, and finish.
func (h *holding) run(ctx context.Context, electStart time.Time) error {
	r, j, c := h.r, h.j, h.c
	s, lease := j.spec.Shard, c.lease
	if stop, err := r.finished(j, c.cp); stop {
		return err // done or halted between our first look and the claim
	}
	m := r.opts.Metrics
	m.SetState(s.Table, s.Index, string(cursor.Running))
	m.SetToken(s.Table, s.Index, lease.Token())
	m.CursorMoved(s.Table, s.Index, time.Now())
	if err := h.beginTakeover(c.acquired.Sub(electStart), c.took); err != nil {
		return err
	}
	r.startRate(s, lease)
	defer r.stopRate(s)
	res, err := h.copyShard(ctx)
	return h.finishShard(ctx, res, err)
}

// copyShard copies the shard from its checkpoint; a takeover checks the
// neighbourhood of the resume point (the last committed batch before it,
// and the first new batch) and completes its record.
func (h *holding) copyShard(ctx context.Context) (batch.Result, error) {
	r, j, cp, lctx := h.r, h.j, h.c.cp, h.c.lease.Context()
	spec := j.spec
	spec.Range = dialect.Range{Lo: cp.Lo, Hi: cp.Hi}
	spec.MaxOutage = r.maxOutage()
	copier := r.copier()
	copier.SchemaCheck = func(ctx context.Context) error { return r.sourceChanged(ctx, j) }
	var check neighbourhood
	noted := false
	note := func() { // the takeover's RTO is known once the first new batch is checked
		if h.tk != nil && !noted {
			noted = true
			r.noteTakeover(lctx, spec.Shard, h.tk, check, h.log)
		}
	}
	if h.tk != nil && cp.LastKey != nil {
		check = r.checkNeighbourhood(lctx, j, spec, cp.LastKey, nil, h.log)
		copier.AfterFirst = func(rows [][]any) {
			first := r.checkNeighbourhood(lctx, j, spec, nil, rows, h.log)
			check.rows, check.diffs, check.took = check.rows+first.rows, check.diffs+first.diffs, check.took+first.took
			note()
		}
	}
	res, err := copier.Copy(ctx, spec, h.c.lease, cp)
	if h.tk != nil {
		note()
		h.tk.ReplayedRows = res.Updated
		r.addTakeover(*h.tk)
	}
	return res, err
}

// finishShard records the end of the copy: done, taken again (the target
// lost committed batches), halted, or fenced.
func (h *holding) finishShard(ctx context.Context, res batch.Result, err error) error {
	r, j, lease, s := h.r, h.j, h.c.lease, h.j.spec.Shard
	m := r.opts.Metrics
	result := ShardResult{Table: j.table.Name, Target: j.table.Target, Shard: s.Index, State: string(cursor.Running), Token: lease.Token(), Rows: res.Rows, Batches: res.Batches}
	if err == nil {
		err = r.setState(lease, s, cursor.Done)
	}
	switch {
	case errors.Is(err, cursor.ErrMoved) && lease.Context().Err() == nil:
		// The target lost batches it had committed: give the lease back
		// and take the shard again, from the cursor the target has.
		h.log.Warn("the target lost committed batches (a crash without durable commits, or a failover to a lagging replica); resuming from its cursor", "err", err)
		return errRetry{err}
	case errors.Is(err, batch.ErrHalted):
		if h.tk != nil {
			m.RecoveryFailed(s.Table, s.Index)
		}
		if r.halt(lease, s, h.log) {
			result.State = string(cursor.Halted)
		}
		r.addShard(result)
		return fmt.Errorf("%w: %w", ErrHalted, err)
	case err != nil:
		r.addShard(result)
		return r.fenced(ctx, lease, s, err)
	}
	h.log.Info("shard done", "rows", res.Rows, "batches", res.Batches, "replayed", res.Updated, "ms_per_batch", res.Profile.PerBatch())
	m.SetState(s.Table, s.Index, string(cursor.Done))
	result.State = string(cursor.Done)
	r.addShard(result)
	r.describe()
	return nil
}

// previousHolder is the holder this claim takes over from: the lease's
// record in the lock service, or, when the service lost it (L4; our own refused first
// attempt may have written one since) but the fence row still names
// another holder of a running shard, that holder, waited for since its
// last commit.
func previousHolder(lease *lock.Lease, cp cursor.Checkpoint, last watermark) (lock.Holder, time.Duration) {
	prev, wait, owner := lease.Previous(), lease.Wait(), lease.Owner()
	if (prev.Owner == "" || prev.Owner == owner) && last.owner != "" && last.owner != owner && cp.State == cursor.Running {
		return lock.Holder{Owner: last.owner, Token: int64(last.token)}, max(time.Since(cp.UpdatedAt), 0)
	}
	return prev, wait
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

var _ fence.Lease = (*lock.Lease)(nil)
