package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/keyset"
	"github.com/migrate-dev/migrate/metrics"
	"github.com/migrate-dev/migrate/verify"
)

// beginTakeover records a takeover when the claim replaced a live holder
// (SPEC §6), or logs that the shard is held afresh. A shard taken over
// more than max_takeovers times within takeover_window halts: something
// stops every holder.
func (w *shardWork) beginTakeover(c *hold.Claim) error {
	r, j, cp, s := w.r, w.j, w.cp, c.Unit
	if !c.TakenOver() {
		w.log.Info("holding the shard", "resume_after", cp.LastKey, "rows_done", cp.RowsDone)
		return nil
	}
	prev, token := c.Previous, c.Lease.Token()
	w.tk = &Takeover{
		Table: j.table.Name, Target: j.table.Target, Shard: s.Index, Token: token,
		PreviousOwner: prev.Owner, PreviousToken: prev.Token,
		WaitMs: c.Wait.Milliseconds(), ElectMs: c.Elect.Milliseconds(), RecoverMs: c.Took.Milliseconds(),
		PredictedRtoMs: r.PredictedRTO().Milliseconds(), ResumedAfter: fmt.Sprint(cp.LastKey), ResumeKey: cp.LastText,
	}
	w.log.Info("taking over", "previous_owner", prev.Owner, "previous_token", prev.Token, "wait", c.Wait, "resume_after", cp.LastKey, "rows_done", cp.RowsDone)
	n := w.countTakeover(c.Lease.Context(), s)
	if n <= int64(r.plan.MaxTakeovers) {
		return nil
	}
	r.opts.Metrics.RecoveryFailed(s.Table, s.Index)
	err := fmt.Errorf("%w: %s was taken over %d times within %v (max_takeovers %d): something stops every holder",
		hold.ErrHalted, s, n, r.plan.TakeoverWindow, r.plan.MaxTakeovers)
	state := cursor.Running
	if w.halt(c, err) {
		state = cursor.Halted
	}
	r.addShard(ShardResult{Table: j.table.Name, Target: j.table.Target, Shard: s.Index, State: string(state), Token: token})
	return err
}

// countTakeover records the takeover (w.tk) in the target and returns how
// many the shard has seen within the plan's takeover window, this one
// included; 0 when the target could not tell (the takeover goes on: the
// counter is a guard, not a condition of recovery).
func (w *shardWork) countTakeover(ctx context.Context, s fence.Shard) int64 {
	r, tk := w.r, w.tk
	rec, _ := json.Marshal(tk)
	n, err := r.records.RecordTakeover(ctx, s, tk.Token, r.plan.TakeoverWindow, string(rec))
	if err != nil {
		w.log.Warn("could not count the takeover", "err", err)
		return 0
	}
	return n
}

// noteTakeover completes the takeover's (w.tk) RTO with the check of the
// resume neighbourhood, logs the breakdown, and records it for status and
// metrics.
func (w *shardWork) noteTakeover(ctx context.Context, s fence.Shard, check neighbourhood) {
	r, tk, log := w.r, w.tk, w.log
	tk.VerifyMs, tk.CheckedRows, tk.CheckDiffs = check.took.Milliseconds(), check.rows, check.diffs
	tk.RtoMs = tk.WaitMs + tk.ElectMs + tk.RecoverMs + tk.VerifyMs
	log.Info("takeover RTO", "rto_ms", tk.RtoMs, "wait_ms", tk.WaitMs, "elect_ms", tk.ElectMs, "recover_ms", tk.RecoverMs,
		"verify_ms", tk.VerifyMs, "predicted_rto_ms", tk.PredictedRtoMs, "checked_rows", tk.CheckedRows, "check_differences", tk.CheckDiffs)
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	r.opts.Metrics.Takeover(s.Table, s.Index, metrics.Takeover{
		Wait: ms(tk.WaitMs), Elect: ms(tk.ElectMs), Recover: ms(tk.RecoverMs), Verify: ms(tk.VerifyMs),
		RTO: ms(tk.RtoMs), Predicted: ms(tk.PredictedRtoMs), Token: tk.Token, Expired: true,
	})
	rec, _ := json.Marshal(tk)
	if err := r.records.NoteTakeover(ctx, s, tk.Token, string(rec)); err != nil {
		log.Warn("could not record the takeover's RTO", "err", err)
	}
}

// PredictedRTO is the longest wait the configuration allows before a
// standby takes over, on the plan's lock service (lock.Locker.MaxWait):
// the lease's TTL (a ZooKeeper session's timeout) from the holder's last
// renewal, plus how late the standby can learn of the expiry — its poll
// period, TTL/10, for Redis and a database; the service's expiry check
// for etcd and ZooKeeper, whose standbys are told at once. Failure
// detection runs inside that countdown and is not added again (SPEC §6).
func (r *Runner) PredictedRTO() time.Duration {
	return r.locker.MaxWait()
}

// neighbourhood is the result of a takeover's check of the resume point.
type neighbourhood struct {
	rows, diffs int64
	took        time.Duration
}

// checkNeighbourhood compares a batch around the resume point with the
// source (SPEC §6: verify the neighbourhood before continuing): the last
// committed batch before it (read from the source up to last), or the first
// new batch (rows, as just written). A difference is logged and reported —
// the end-of-table verification then fails the run, and `migrate repair`
// fixes it — but does not stop the copy.
func (w *shardWork) checkNeighbourhood(ctx context.Context, spec batch.Spec, last []any, rows [][]any) (n neighbourhood) {
	r, j, log := w.r, w.j, w.log
	start := time.Now()
	defer func() { n.took = time.Since(start) }()
	src, err := rows, error(nil)
	if last != nil {
		src, err = r.copier().Reader(spec).Last(ctx, last)
	}
	if err == nil && len(src) > 0 {
		var dst [][]any
		if dst, err = w.targetRows(ctx, src); err == nil {
			var missing, changed int64
			missing, changed, err = verify.Rows(r.srcD.Engine(), r.dstD.Engine(), j.src, j.dst, spec.Key, src, dst)
			n.rows, n.diffs = int64(len(src)), missing+changed
		}
	}
	switch {
	case err != nil:
		log.Warn("could not check the resume neighbourhood", "err", err)
	case n.diffs > 0:
		log.Error("the last committed batch before the resume point differs from the source", "rows", n.rows, "differences", n.diffs)
	default:
		log.Info("resume neighbourhood checked", "rows", n.rows, "took", time.Since(start))
	}
	return n
}

// targetRows reads from the target the rows of the shard's table with
// the keys of rows.
func (w *shardWork) targetRows(ctx context.Context, rows [][]any) ([][]any, error) {
	r, j := w.r, w.j
	if err := r.scanPool(ctx); err != nil {
		return nil, err
	}
	keyIdx, err := keyset.KeyIndexes(j.spec.Columns, j.spec.Key)
	if err != nil {
		return nil, err
	}
	keys := make([][]any, len(rows))
	for i, row := range rows {
		keys[i] = keyset.KeyOf(row, keyIdx)
	}
	rd := keyset.Reader{DB: r.scan, SQL: r.dstD, Table: j.spec.Target, Columns: j.spec.Columns, Key: j.spec.Key, Limit: len(rows)}
	return rd.ByKeys(ctx, keys)
}
