package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/lock"
)

// errReclaim means the fence watermark is at or above the token Redis gave
// us (Redis lost its counter): raise the counter and acquire again (L4).
type errReclaim struct{ watermark fence.Token }

func (e errReclaim) Error() string {
	return fmt.Sprintf("token not above the watermark %d", e.watermark)
}

// runShard drives one shard until it is done, by this instance or another:
// acquire the lease or wait as a standby, take over, copy, finish.
func (r *Runner) runShard(ctx context.Context, j shardJob) error {
	s := j.spec.Shard
	base := leaseBase(s)
	log := r.log.With("shard", s.String())
	backoff := 100 * time.Millisecond
	electStart := time.Now()
	for {
		cp, err := r.cursor.Read(ctx, r.dst, s)
		if err != nil {
			return err
		}
		switch cp.State {
		case cursor.Done:
			r.addShard(ShardResult{Table: j.table.Name, Shard: s.Index, State: string(cp.State), Token: int64(cp.Token), ByOther: true})
			return nil
		case cursor.Halted:
			return fmt.Errorf("%w: %s is halted; see `migrate status`", ErrHalted, s)
		}
		lease, err := r.locker.Acquire(ctx, base, r.opts.Owner)
		var held *lock.HeldError
		switch {
		case errors.As(err, &held):
			log.Info("standby: lease held by another instance", "owner", held.Owner, "token", held.Token, "ttl", held.TTL)
			if err := r.locker.WaitFree(ctx, base); err != nil {
				return err
			}
			electStart = time.Now()
			continue
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Warn("lease acquire failed, retrying", "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff/2 + rand.N(backoff)):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		elect := time.Since(electStart)
		err = r.hold(ctx, j, lease, elect)
		r.release(ctx, lease, log)
		var rc errReclaim
		if errors.As(err, &rc) {
			log.Warn("redis issued a token not above the target's watermark; raising the counter (L4)", "token", lease.Token(), "watermark", int64(rc.watermark))
			if err := r.locker.RaiseToken(ctx, base, int64(rc.watermark)); err != nil {
				return err
			}
			electStart = time.Now()
			continue
		}
		return err
	}
}

// release gives the lease back (compare-and-delete), even when ctx was
// cancelled by a signal.
func (r *Runner) release(ctx context.Context, lease *lock.Lease, log interface{ Warn(string, ...any) }) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := lease.Release(ctx); err != nil && !errors.Is(err, lock.ErrNotOwner) {
		log.Warn("lease release failed; it will expire by its TTL", "err", err)
	}
}

// hold does the work of a granted lease: the takeover transaction, the copy
// and the finish.
func (r *Runner) hold(ctx context.Context, j shardJob, lease *lock.Lease, elect time.Duration) error {
	s, t, owner := j.spec.Shard, fence.Token(lease.Token()), lease.Owner()
	log := r.log.With("shard", s.String(), "token", int64(t))
	lctx := lease.Context()
	recoverStart := time.Now()
	cp, err := r.takeover(lctx, s, t, owner)
	if err != nil {
		return r.fenced(lctx, err)
	}
	if cp.State == cursor.Done {
		r.addShard(ShardResult{Table: j.table.Name, Shard: s.Index, State: string(cp.State), Token: int64(cp.Token), ByOther: true})
		return nil
	}
	recoverDur := time.Since(recoverStart)
	prev := lease.Previous()
	takeover := prev.Owner != "" && !prev.Released
	if takeover {
		log.Info("taking over", "previous_owner", prev.Owner, "previous_token", prev.Token, "wait", lease.Wait(), "resume_after", cp.LastKey, "rows_done", cp.RowsDone)
	} else {
		log.Info("holding the shard", "resume_after", cp.LastKey, "rows_done", cp.RowsDone)
	}
	spec := j.spec
	spec.Range = dialect.Range{Lo: cp.Lo, Hi: cp.Hi}
	res, err := r.copier().Copy(ctx, spec, lease, t, owner, cp.LastKey)
	if takeover {
		r.addTakeover(Takeover{
			Table: j.table.Name, Shard: s.Index, Token: int64(t), PreviousOwner: prev.Owner,
			WaitMs: lease.Wait().Milliseconds(), ElectMs: elect.Milliseconds(), RecoverMs: recoverDur.Milliseconds(),
			RtoMs:        (lease.Wait() + elect + recoverDur).Milliseconds(),
			ReplayedRows: res.Updated, ResumedAfter: fmt.Sprint(cp.LastKey),
		})
	}
	if err != nil {
		r.addShard(ShardResult{Table: j.table.Name, Shard: s.Index, State: string(cursor.Running), Token: int64(t), Rows: res.Rows, Batches: res.Batches})
		if errors.Is(err, batch.ErrHalted) {
			r.halt(ctx, s, t, owner, log)
			return fmt.Errorf("%w: %w", ErrHalted, err)
		}
		return r.fenced(lctx, err)
	}
	if err := r.setState(lctx, s, t, owner, cursor.Done); err != nil {
		return r.fenced(lctx, err)
	}
	log.Info("shard done", "rows", res.Rows, "batches", res.Batches, "replayed", res.Updated)
	r.addShard(ShardResult{Table: j.table.Name, Shard: s.Index, State: string(cursor.Done), Token: int64(t), Rows: res.Rows, Batches: res.Batches})
	return nil
}

// takeover is C2: one transaction raises the watermark strictly to t (which
// waits out any in-flight transaction of the old holder) and reads the
// checkpoint.
func (r *Runner) takeover(ctx context.Context, s fence.Shard, t fence.Token, owner string) (cp cursor.Checkpoint, err error) {
	err = inTx(ctx, r.dst, func(tx *sql.Tx) error {
		if err := r.fence.Claim(ctx, tx, s, t, owner); err != nil {
			var st *fence.StaleError
			if errors.As(err, &st) {
				return errReclaim{st.Watermark}
			}
			return err
		}
		cp, err = r.cursor.Read(ctx, tx, s)
		return err
	})
	return cp, err
}

// setState records the shard's state, fenced like a batch.
func (r *Runner) setState(ctx context.Context, s fence.Shard, t fence.Token, owner string, st cursor.State) error {
	return inTx(ctx, r.dst, func(tx *sql.Tx) error {
		if err := r.fence.Check(ctx, tx, s, t, owner); err != nil {
			return err
		}
		return r.cursor.SetState(ctx, tx, s, st, t)
	})
}

// halt records the shard halted so no instance resumes it automatically,
// even when the run is being cancelled.
func (r *Runner) halt(ctx context.Context, s fence.Shard, t fence.Token, owner string, log interface{ Error(string, ...any) }) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.setState(ctx, s, t, owner, cursor.Halted); err != nil {
		log.Error("could not record the shard halted", "shard", s.String(), "err", err)
	}
}

// inTx runs fn in a transaction: committed when fn succeeds, rolled back
// otherwise.
func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// fenced classifies an error that stopped a holder: a refused token or a lost
// lease becomes ErrFenced (counted as a stale rejection when the target
// refused it); anything else is returned as is.
func (r *Runner) fenced(lctx context.Context, err error) error {
	var rc errReclaim
	if errors.As(err, &rc) {
		return err
	}
	if errors.Is(err, fence.ErrStale) {
		r.mu.Lock()
		r.report.StaleRejections++
		r.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	if errors.Is(err, batch.ErrLeaseLost) || errors.Is(context.Cause(lctx), lock.ErrLost) {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
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
