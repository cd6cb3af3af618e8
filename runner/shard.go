package runner

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/keyset"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/metrics"
	"github.com/migrate-dev/migrate/verify"
)

// errReclaim means the fence watermark is at or above the token Redis gave
// us (Redis lost its counter): raise the counter and acquire again (L4).
type errReclaim struct{ watermark fence.Token }

func (e errReclaim) Error() string {
	return fmt.Sprintf("token not above the watermark %d", e.watermark)
}

// errRetry wraps a failure before any row was written (acquire, takeover):
// the lease is given back and the shard tried again after a backoff.
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

// runShard drives one shard until it is done, by this instance or another:
// acquire the lease or wait as a standby, take over, copy, finish.
func (r *Runner) runShard(ctx context.Context, j shardJob) error {
	s := j.spec.Shard
	base := leaseBase(s)
	log := r.log.With("shard", s.String())
	budget := retry.Budget{MaxFailures: r.plan.MaxRetries, MaxOutage: r.maxOutage()}
	var lost error // the lease lost to Redis that this loop is taking again
	electStart := time.Now()
	for {
		cp, err := r.cursor.Read(ctx, r.dst, s)
		if err == nil {
			if stop, err := r.finished(j, cp); stop {
				return err
			}
			err = r.withSlot(ctx, func() error { return r.acquireAndHold(ctx, j, base, electStart) })
		}
		var held *lock.HeldError
		var rc errReclaim
		var again errRetry
		var ll errLeaseLost
		if errors.As(err, &ll) {
			// A lease lost to Redis, with no successor in the target, is
			// taken again (with a token above the watermark); one lost to a
			// successor ends here (exit 4).
			if sup, werr := r.superseded(ctx, s, ll.token); werr == nil && !sup {
				log.Warn("lease lost with no successor in the target (Redis restarted or unreachable); taking the shard again", "err", err)
				lost, err = err, errRetry{err}
			}
		}
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &held):
			r.opts.Metrics.SetState(s.Table, s.Index, "standby")
			log.Info("standby: lease held by another instance", "owner", held.Owner, "token", held.Token, "ttl", held.TTL)
			// Watching a lease is of use only with a slot to take it in:
			// while every slot is busy, no polling (Redis load).
			if err := r.waitSlotFree(ctx); err != nil {
				return err
			}
			if err := r.locker.WaitFree(ctx, base); err != nil {
				return err
			}
		case errors.As(err, &rc):
			log.Warn("the token is not above the target's watermark (Redis lost its counter, L4, or the table holds rows of an earlier plan); raising the counter", "watermark", int64(rc.watermark))
			if err := r.locker.RaiseToken(ctx, base, int64(rc.watermark)); err != nil {
				return err
			}
		case errors.As(err, &again) || !errors.Is(err, ErrHalted) && !errors.Is(err, ErrFenced):
			// Anything else failed before a row was written (reading the
			// checkpoint, the lease, the takeover): try again, a few times,
			// or while a database is unavailable or the claim waits for the
			// previous holder's transaction to end (its server-side bounds
			// end it), up to the outage limit.
			kind := retry.Failure
			if dialect.Classify(err) == dialect.Unavailable || dialect.LockTimeout(err) {
				kind = retry.Outage
			}
			attempt, wait, ex := budget.Fail(err, kind)
			switch {
			case ex != nil && ex.Outage > 0:
				return errors.Join(lost, fmt.Errorf("%s: unavailable for %v (max_outage %v): %w", s, ex.Outage.Round(time.Second), r.maxOutage(), err))
			case ex != nil:
				return errors.Join(lost, fmt.Errorf("%s: gave up after %d attempts: %w", s, ex.Failures, err))
			}
			log.Warn("could not take the shard, retrying", "err", err, "attempt", attempt, "backoff", wait)
			if err := retry.Sleep(ctx, wait); err != nil {
				return err
			}
		default:
			return err
		}
		electStart = time.Now()
	}
}

// withSlot runs fn holding one of the instance's shard slots (--parallel),
// waiting for one to free.
func (r *Runner) withSlot(ctx context.Context, fn func() error) error {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.slots }()
	return fn()
}

// maxOutage is how long a database may stay unreachable before a shard
// gives up (the plan's max_outage; batch.Spec.MaxOutage).
func (r *Runner) maxOutage() time.Duration { return r.plan.MaxOutage }

// waitSlotFree returns once one of the instance's shard slots is free,
// without taking it.
func (r *Runner) waitSlotFree(ctx context.Context) error {
	select {
	case r.slots <- struct{}{}:
		<-r.slots
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finished reports whether the shard needs no more work, recording it.
func (r *Runner) finished(j shardJob, cp cursor.Checkpoint) (bool, error) {
	if cp.State == cursor.Done || cp.State == cursor.Halted {
		r.opts.Metrics.SetState(cp.Shard.Table, cp.Shard.Index, string(cp.State))
	}
	switch cp.State {
	case cursor.Done:
		r.addShard(ShardResult{Table: j.table.Name, Target: j.table.Target, Shard: cp.Shard.Index, State: string(cp.State), Token: int64(cp.Token), ByOther: true})
		r.describe()
		return true, nil
	case cursor.Halted:
		return true, fmt.Errorf("%w: %s is halted; see `migrate status`, then `migrate resume`", ErrHalted, cp.Shard)
	}
	return false, nil
}

// acquireAndHold takes the lease (a *lock.HeldError when another instance
// has it), works the shard and gives the lease back.
func (r *Runner) acquireAndHold(ctx context.Context, j shardJob, base string, electStart time.Time) error {
	lease, err := r.locker.Acquire(ctx, base, r.opts.Owner)
	var held *lock.HeldError
	if errors.As(err, &held) {
		return err
	}
	if err != nil {
		return errRetry{err}
	}
	defer r.release(ctx, lease)
	return r.hold(ctx, j, lease, time.Since(electStart))
}

// release gives the lease back (compare-and-delete), even when ctx was
// cancelled by a signal.
func (r *Runner) release(ctx context.Context, lease *lock.Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := lease.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotOwner) {
		r.log.Warn("lease release failed; it will expire by its TTL", "lease", lease.Key(), "err", err)
	}
}

// hold does the work of a granted lease: the takeover transaction, the copy
// and the finish.
func (r *Runner) hold(ctx context.Context, j shardJob, lease *lock.Lease, elect time.Duration) error {
	s, t, owner := j.spec.Shard, fence.Token(lease.Token()), lease.Owner()
	log := r.log.With("shard", s.String(), "token", int64(t))
	lctx := lease.Context()
	recoverStart := time.Now()
	cp, last, err := r.takeover(lease, s, t, owner)
	if err != nil {
		var rc errReclaim
		if errors.As(err, &rc) || lctx.Err() != nil {
			return r.fenced(ctx, lctx, s, t, err)
		}
		if p := lease.Previous(); p.Owner != "" && !p.Released {
			r.opts.Metrics.RecoveryFailed(s.Table, s.Index) // the lease was reclaimed; the business recovery failed
		}
		return errRetry{fmt.Errorf("takeover of %s: %w", s, err)}
	}
	if stop, err := r.finished(j, cp); stop {
		return err // done or halted between our first look and the claim
	}
	recoverDur := time.Since(recoverStart)
	m := r.opts.Metrics
	m.SetState(s.Table, s.Index, string(cursor.Running))
	m.SetToken(s.Table, s.Index, int64(t))
	m.CursorMoved(s.Table, s.Index, time.Now())
	prev, wait := lease.Previous(), lease.Wait()
	if (prev.Owner == "" || prev.Owner == owner) && last.owner != "" && last.owner != owner && cp.State == cursor.Running {
		// Redis lost the lease's record (L4; our own refused first attempt
		// may have written one since), but the fence row still names the
		// last holder: a takeover all the same, waited for since that
		// holder's last commit.
		prev, wait = lock.Holder{Owner: last.owner, Token: int64(last.token)}, max(time.Since(cp.UpdatedAt), 0)
	}
	var tk *Takeover
	if prev.Owner != "" && !prev.Released {
		tk = &Takeover{
			Table: j.table.Name, Target: j.table.Target, Shard: s.Index, Token: int64(t),
			PreviousOwner: prev.Owner, PreviousToken: prev.Token,
			WaitMs: wait.Milliseconds(), ElectMs: elect.Milliseconds(), RecoverMs: recoverDur.Milliseconds(),
			PredictedRtoMs: r.predictedRTO().Milliseconds(), ResumedAfter: fmt.Sprint(cp.LastKey), ResumeKey: cp.LastText,
		}
		log.Info("taking over", "previous_owner", prev.Owner, "previous_token", prev.Token, "wait", wait, "resume_after", cp.LastKey, "rows_done", cp.RowsDone)
		if n := r.countTakeover(lctx, s, tk, log); n > int64(r.plan.MaxTakeovers) {
			m.RecoveryFailed(s.Table, s.Index)
			why := fmt.Errorf("%w: %s was taken over %d times within %v (max_takeovers %d): something stops every holder",
				ErrHalted, s, n, r.plan.TakeoverWindow, r.plan.MaxTakeovers)
			state := cursor.Running
			if r.halt(lease, s, t, owner, log) {
				state = cursor.Halted
			}
			r.addShard(ShardResult{Table: j.table.Name, Target: j.table.Target, Shard: s.Index, State: string(state), Token: int64(t)})
			return why
		}
	} else {
		log.Info("holding the shard", "resume_after", cp.LastKey, "rows_done", cp.RowsDone)
	}
	r.startRate(s, lease)
	defer r.stopRate(s)
	spec := j.spec
	spec.Range = dialect.Range{Lo: cp.Lo, Hi: cp.Hi}
	spec.MaxOutage = r.maxOutage()
	var check neighbourhood
	copier := r.copier()
	copier.SchemaCheck = func(ctx context.Context) error { return r.sourceChanged(ctx, j) }
	noted := false
	note := func() { // the takeover's RTO is known once the first new batch is checked
		if tk != nil && !noted {
			noted = true
			r.noteTakeover(lctx, s, tk, check, log)
		}
	}
	if tk != nil && cp.LastKey != nil {
		check = r.checkNeighbourhood(lctx, j, spec, cp.LastKey, nil, log)
		copier.AfterFirst = func(rows [][]any) {
			first := r.checkNeighbourhood(lctx, j, spec, nil, rows, log)
			check.rows, check.diffs, check.took = check.rows+first.rows, check.diffs+first.diffs, check.took+first.took
			note()
		}
	}
	res, err := copier.Copy(ctx, spec, lease, cp)
	if tk != nil {
		note()
		tk.ReplayedRows = res.Updated
		r.addTakeover(*tk)
	}
	result := ShardResult{Table: j.table.Name, Target: j.table.Target, Shard: s.Index, State: string(cursor.Running), Token: int64(t), Rows: res.Rows, Batches: res.Batches}
	if err == nil {
		err = r.setState(lease, s, t, owner, cursor.Done)
	}
	if errors.Is(err, cursor.ErrMoved) && lctx.Err() == nil {
		// The target lost batches it had committed: give the lease back
		// and take the shard again, from the cursor the target has.
		log.Warn("the target lost committed batches (a crash without durable commits, or a failover to a lagging replica); resuming from its cursor", "err", err)
		return errRetry{err}
	}
	if err != nil {
		if errors.Is(err, batch.ErrHalted) {
			if tk != nil {
				m.RecoveryFailed(s.Table, s.Index)
			}
			if r.halt(lease, s, t, owner, log) {
				result.State = string(cursor.Halted)
			}
			r.addShard(result)
			return fmt.Errorf("%w: %w", ErrHalted, err)
		}
		r.addShard(result)
		return r.fenced(ctx, lctx, s, t, err)
	}
	log.Info("shard done", "rows", res.Rows, "batches", res.Batches, "replayed", res.Updated)
	m.SetState(s.Table, s.Index, string(cursor.Done))
	result.State = string(cursor.Done)
	r.addShard(result)
	r.describe()
	return nil
}

// countTakeover records the takeover in Redis and returns how many the
// shard has seen within the plan's takeover window, this one included; 0
// when Redis could not tell (the takeover goes on: the counter is a guard,
// not a condition of recovery).
func (r *Runner) countTakeover(ctx context.Context, s fence.Shard, tk *Takeover, log *slog.Logger) int64 {
	rec, _ := json.Marshal(tk)
	n, err := r.locker.RecordTakeover(ctx, leaseBase(s), tk.Token, r.plan.TakeoverWindow, string(rec))
	if err != nil {
		log.Warn("could not count the takeover", "err", err)
		return 0
	}
	return n
}

// noteTakeover completes the takeover's RTO with the check of the resume
// neighbourhood, logs the breakdown, and records it for status and metrics.
func (r *Runner) noteTakeover(ctx context.Context, s fence.Shard, tk *Takeover, check neighbourhood, log *slog.Logger) {
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
	if err := r.locker.NoteTakeover(ctx, leaseBase(s), r.plan.TakeoverWindow, string(rec)); err != nil {
		log.Warn("could not record the takeover's RTO", "err", err)
	}
}

// predictedRTO is the longest wait the configuration allows before a
// standby takes over: the lease's TTL from the holder's last renewal, plus
// the standby's poll period, TTL/10 (lock.Options.PollEvery). Failure
// detection runs inside that countdown and is not added again (SPEC §6).
func (r *Runner) predictedRTO() time.Duration {
	return r.plan.LeaseTTL + r.plan.LeaseTTL/10
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
func (r *Runner) checkNeighbourhood(ctx context.Context, j shardJob, spec batch.Spec, last []any, rows [][]any, log *slog.Logger) (n neighbourhood) {
	start := time.Now()
	defer func() { n.took = time.Since(start) }()
	src, err := rows, error(nil)
	if last != nil {
		src, err = r.copier().Reader(spec).Last(ctx, last)
	}
	if err == nil && len(src) > 0 {
		var dst [][]any
		if dst, err = r.targetRows(ctx, j, src); err == nil {
			var missing, changed int64
			missing, changed, err = verify.Rows(j.src, j.dst, spec.Key, src, dst)
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

// targetRows reads from the target the rows with the keys of rows.
func (r *Runner) targetRows(ctx context.Context, j shardJob, rows [][]any) ([][]any, error) {
	if err := r.openScan(ctx); err != nil {
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

// watermark is a fence row as it was before a claim.
type watermark struct {
	token fence.Token
	owner string
}

// takeover is C2: one transaction raises the watermark strictly to t (which
// waits out any in-flight transaction of the old holder) and reads the
// checkpoint. It also returns the watermark it replaced.
func (r *Runner) takeover(lease *lock.Lease, s fence.Shard, t fence.Token, owner string) (cp cursor.Checkpoint, last watermark, err error) {
	err = r.leaseTx(lease, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		if last.token, last.owner, err = r.fence.Watermark(ctx, tx, s); err != nil {
			return err
		}
		if err := r.fence.Claim(ctx, tx, s, t, owner); err != nil {
			var st *fence.StaleError
			if errors.As(err, &st) {
				return errReclaim{st.Watermark}
			}
			return err
		}
		cp, err = r.cursor.ReadForUpdate(ctx, tx, s)
		return err
	})
	return cp, last, err
}

// setState records the shard's state, fenced like a batch.
func (r *Runner) setState(lease *lock.Lease, s fence.Shard, t fence.Token, owner string, st cursor.State) error {
	return r.leaseTx(lease, func(ctx context.Context, tx *sql.Tx) error {
		if err := r.fence.Check(ctx, tx, s, t, owner); err != nil {
			return err
		}
		return r.cursor.SetState(ctx, tx, s, st, t)
	})
}

// halt records the shard halted so no instance resumes it automatically,
// and reports whether it could.
func (r *Runner) halt(lease *lock.Lease, s fence.Shard, t fence.Token, owner string, log *slog.Logger) bool {
	if err := r.setState(lease, s, t, owner, cursor.Halted); err != nil {
		log.Error("could not record the shard halted", "err", err)
		return false
	}
	log.Error("shard halted: automatic recovery gave up; fix the cause, then run `migrate resume`")
	r.opts.Metrics.Halted(s.Table, s.Index)
	return true
}

// leaseTx runs fn in a transaction bounded by the lease (batch.Begin):
// committed when fn succeeds, rolled back otherwise.
func (r *Runner) leaseTx(lease *lock.Lease, fn func(context.Context, *sql.Tx) error) error {
	tx, ctx, cancel, err := fence.Begin(r.dst, r.dstD, lease)
	if err != nil {
		return err
	}
	defer cancel()
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// fenced classifies an error that stopped a holder: a refused token or a lost
// lease becomes ErrFenced (counted as a stale rejection when the target
// refused it); a cancelled run or anything else is returned as is.
func (r *Runner) fenced(ctx, lctx context.Context, s fence.Shard, token fence.Token, err error) error {
	var rc errReclaim
	switch {
	case errors.As(err, &rc):
		return err
	case errors.Is(err, fence.ErrStale):
		r.mu.Lock()
		r.report.StaleRejections++
		r.mu.Unlock()
		r.opts.Metrics.StaleRejected(s.Table, s.Index)
		return fmt.Errorf("%w: %w", ErrFenced, err)
	case ctx.Err() != nil:
		return err
	case errors.Is(err, batch.ErrLeaseLost) || errors.Is(context.Cause(lctx), lock.ErrLost):
		r.opts.Metrics.SelfFenced(s.Table, s.Index)
		return fmt.Errorf("%w: %w", ErrFenced, errLeaseLost{err, int64(token)})
	}
	return err
}

// errLeaseLost: the holder stopped writing because its lease ended (it
// could not renew in time, or Redis no longer had it), not because a
// successor's token was refused to it.
type errLeaseLost struct {
	err   error
	token int64 // the lease's
}

func (e errLeaseLost) Error() string { return e.err.Error() }
func (e errLeaseLost) Unwrap() error { return e.err }

// superseded reports whether another holder has claimed the shard in the
// target since token: the watermark is above it. When it is not, the lease
// was lost to Redis (a restart, an outage) rather than to a successor, and
// the shard may be taken again.
func (r *Runner) superseded(ctx context.Context, s fence.Shard, token int64) (bool, error) {
	w, _, err := r.fence.Watermark(ctx, r.dst, s)
	return int64(w) > token, err
}

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
