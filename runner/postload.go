package runner

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/schema"
)

// The post-load phase runs once every shard of the plan is done: the
// sequence resets of every target table, then the secondary indexes and
// foreign keys setup recorded (faster to build once than to maintain row
// by row, and no load order to respect), then, between two databases of
// one engine, the source's functions, views and triggers (triggers after
// the data, so that they do not fire during the load). It has a shard's lease (one
// instance runs it, the others wait as standbys and take it over when the
// holder dies) and fence watermark, under the name postLoadTable, and its
// state (pending, running, done or halted) in its own row of the steps'
// table (seq 0). Each step runs again harmlessly after a crash
// (dialect.Step), and is marked done under the fence; a step an old
// holder runs after a takeover is the same statement the new holder runs.
const postLoadTable = "_postload"

// postLoadShard is the plan's post-load phase as a shard.
func postLoadShard(p *plans.Plan) fence.Shard {
	return fence.Shard{Plan: p.Name, Table: postLoadTable, Index: 0}
}

// stepRow is a recorded post-load step.
type stepRow struct {
	dialect.Step
	seq   int
	table string // the target table, as the plan names it
	state string
}

// postLoadSteps reads the plan's recorded steps, in the order they run.
func (r *Runner) postLoadSteps(ctx context.Context, q dialect.Querier) ([]stepRow, error) {
	rows, err := q.QueryContext(ctx, r.dstD.PostLoadList(), r.plan.Name)
	if err != nil {
		return nil, fmt.Errorf("post-load steps: %w", err)
	}
	defer rows.Close()
	var out []stepRow
	for rows.Next() {
		var s stepRow // the first, seq 0, is the phase's own row
		var args string
		if err := rows.Scan(&s.seq, &s.Kind, &s.table, &s.Name, &s.SQL, &s.Exists, &args, &s.state); err != nil {
			return nil, fmt.Errorf("post-load steps: %w", err)
		}
		if err := json.Unmarshal([]byte(args), &s.ExistsArgs); err != nil {
			return nil, fmt.Errorf("post-load step %d: %w", s.seq, err)
		}
		s.Table = strings.SplitN(s.table, ".", 2)
		out = append(out, s)
	}
	return out, rows.Err()
}

// recordedSteps is postLoadSteps on a target that may not have the steps'
// table yet (none recorded then).
func (r *Runner) recordedSteps(ctx context.Context, q dialect.Querier) ([]stepRow, error) {
	var ok bool
	tq, args := r.dstD.TableExists([]string{dialect.PostLoadTable})
	if err := q.QueryRowContext(ctx, tq, args...).Scan(&ok); err != nil {
		return nil, fmt.Errorf("target %s: %w", r.plan.Target, err)
	}
	if !ok {
		return nil, nil
	}
	return r.postLoadSteps(ctx, q)
}

// resumePostLoad sets a halted post-load phase back to pending; it
// returns 1 when it was halted.
func (r *Runner) resumePostLoad(ctx context.Context) (int64, error) {
	if steps, err := r.recordedSteps(ctx, r.dst); err != nil || len(steps) == 0 {
		return 0, err
	}
	res, err := r.dst.ExecContext(ctx, r.dstD.PostLoadResume(), r.plan.Name)
	if err != nil {
		return 0, fmt.Errorf("resume the post-load phase: %w", err)
	}
	return res.RowsAffected()
}

// recordSteps records the post-load steps of preps and the schema
// objects' (objects, in their order) not recorded yet, after those that
// are.
func (r *Runner) recordSteps(ctx context.Context, db schema.Conn, preps []*schema.Prepared, objects []dialect.Step, recorded []stepRow) error {
	if len(recorded) == 0 {
		if _, err := db.ExecContext(ctx, r.dstD.PostLoadInsert(), r.plan.Name, 0, dialect.PostLoadPhase, "", "", "", "", "[]"); err != nil {
			return fmt.Errorf("record the post-load phase: %w", err)
		}
	}
	have := map[string]bool{}
	seq, added := 0, 0
	for _, s := range recorded {
		have[s.table+"\x00"+s.Kind+"\x00"+s.Name] = true
		seq = max(seq, s.seq)
	}
	record := func(table string, s dialect.Step) error {
		if have[table+"\x00"+s.Kind+"\x00"+s.Name] {
			return nil
		}
		args, err := json.Marshal(s.ExistsArgs)
		if err != nil {
			return err
		}
		if s.ExistsArgs == nil {
			args = []byte("[]")
		}
		seq++
		if _, err := db.ExecContext(ctx, r.dstD.PostLoadInsert(), r.plan.Name, seq, s.Kind, table, s.Name, s.SQL, s.Exists, string(args)); err != nil {
			return fmt.Errorf("record post-load step %s %s of %s: %w", s.Kind, s.Name, table, err)
		}
		have[table+"\x00"+s.Kind+"\x00"+s.Name] = true
		added++
		return nil
	}
	for i, t := range r.plan.Tables {
		for _, s := range preps[i].Steps {
			if err := record(t.Target, s); err != nil {
				return err
			}
		}
	}
	for _, s := range objects { // of the schema, not of one table
		if err := record("", s); err != nil {
			return err
		}
	}
	if added > 0 && len(recorded) > 0 && recorded[0].state == "done" {
		// A table new to the plan (found by discovery in a later run)
		// brings steps the finished phase has not run: it runs again.
		if _, err := db.ExecContext(ctx, r.dstD.PostLoadState(), "pending", 0, r.plan.Name); err != nil {
			return fmt.Errorf("reopen the post-load phase: %w", err)
		}
	}
	return nil
}

// PostLoadReport is what the post-load phase did in this run.
type PostLoadReport struct {
	Sequences int   `json:"sequences"` // counters reset
	Steps     int   `json:"steps"`     // indexes and foreign keys created by this instance
	Objects   int   `json:"objects"`   // views, materialized views, routines and triggers created by this instance
	ByOther   bool  `json:"by_other"`  // done by another instance (or an earlier run)
	ElapsedMs int64 `json:"elapsed_ms"`
}

// postLoad runs the post-load phase, as its holder or as a standby until
// another instance has done it.
func (r *Runner) postLoad(ctx context.Context) error {
	s := postLoadShard(r.plan)
	log := r.log.With("shard", s.String())
	start := time.Now()
	rep := &PostLoadReport{ByOther: true}
	defer func() {
		rep.ElapsedMs = time.Since(start).Milliseconds()
		r.mu.Lock()
		r.report.PostLoad = rep
		r.mu.Unlock()
	}()
	for {
		steps, err := r.recordedSteps(ctx, r.dst)
		switch {
		case err != nil:
			return err
		case len(steps) == 0:
			return nil // set up by a version without the phase
		case steps[0].state == "done":
			return nil
		case steps[0].state == "halted":
			return r.phaseHalted()
		}
		c, err := r.claimWith(ctx, s, log, r.claimPhase)
		var held *lock.HeldError
		if errors.As(err, &held) {
			log.Info("the post-load phase is held by another instance; waiting as its standby", "holder", held.Owner)
			if err := retry.Sleep(ctx, r.postLoadPoll()); err != nil {
				return err
			}
			continue
		}
		if c != nil && errors.Is(err, errPhaseDone) {
			r.release(ctx, c.lease)
			return nil
		}
		if err != nil {
			if c != nil {
				r.release(ctx, c.lease)
			}
			return err
		}
		rep.ByOther = false
		// A takeover only when the phase was left running by another
		// holder as the claim found it, not as first read: a holder may
		// finish and release in between.
		if c.last.owner != "" && c.last.owner != r.opts.Owner && c.cp.State == cursor.Running {
			r.notePostLoadTakeover(c, log)
		}
		err = r.runPostLoad(ctx, c.lease, log, rep)
		if err != nil && !errors.Is(err, ErrHalted) {
			err = r.fenced(ctx, c.lease, s, err)
		}
		r.release(ctx, c.lease)
		return err
	}
}

// errPhaseDone: the post-load phase was found done when claimed (another
// instance finished it after this one last looked).
var errPhaseDone = errors.New("the post-load phase is done")

// claimPhase claims the post-load phase's fence and records it running,
// in one transaction, which reads the phase's state as the claim found it
// (after the watermark's lock, so after any previous holder's last
// commit): the checkpoint's State. A phase found done is errPhaseDone; one
// found halted stays halted (ErrHalted), for an operator to resume.
//
// The claim holds the plan's setup lock: setup reads the phase's state
// and drops the foreign keys of the load under it, and must not find the
// phase pending while a holder starts re-creating them (see
// dropForeignKeys).
func (r *Runner) claimPhase(lease *lock.Lease, s fence.Shard) (cp cursor.Checkpoint, last watermark, err error) {
	err = r.underSetupLock(lease, func() error {
		return r.leaseTx(lease, func(ctx context.Context, tx *sql.Tx) error {
			var err error
			cp, last, err = r.claimPhaseTx(ctx, tx, lease, s)
			return err
		})
	})
	return cp, last, err
}

// claimPhaseTx is claimPhase's transaction.
func (r *Runner) claimPhaseTx(ctx context.Context, tx *sql.Tx, lease *lock.Lease, s fence.Shard) (cp cursor.Checkpoint, last watermark, err error) {
	if last, err = r.raiseFence(ctx, tx, lease, s); err != nil {
		return cp, last, err
	}
	steps, err := r.postLoadSteps(ctx, tx)
	switch {
	case err != nil:
		return cp, last, err
	case len(steps) > 0 && steps[0].state == "done":
		return cp, last, errPhaseDone
	case len(steps) > 0 && steps[0].state == "halted":
		return cp, last, r.phaseHalted() // by the holder that released just before
	case len(steps) > 0:
		cp.State = cursor.State(steps[0].state)
	}
	_, err = tx.ExecContext(ctx, r.dstD.PostLoadState(), "running", lease.Token(), r.plan.Name)
	return cp, last, err
}

// underSetupLock runs fn holding the plan's setup lock, on a connection of
// its own.
func (r *Runner) underSetupLock(lease *lock.Lease, fn func() error) (err error) {
	conn, err := r.dst.Conn(lease.Context())
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer conn.Close()
	unlock, err := schema.Lock(lease.Context(), conn, r.dstD, r.setupLockName())
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unlock(); uerr != nil && err == nil {
			err = uerr
		}
	}()
	return fn()
}

// finishPhase records the phase done, or pending again when another
// instance's setup recorded steps while it ran (a table new to a
// discovering plan): those steps wait for the run that copies their
// tables, which runs the phase again once its shards are done. Under the
// setup lock, so that no setup records a step between the look and the
// mark.
func (r *Runner) finishPhase(lease *lock.Lease, log *slog.Logger) error {
	return r.underSetupLock(lease, func() error {
		return r.leaseTx(lease, func(ctx context.Context, tx *sql.Tx) error {
			if err := r.fence.CheckLease(ctx, tx, postLoadShard(r.plan), lease); err != nil {
				return err
			}
			steps, err := r.postLoadSteps(ctx, tx)
			if err != nil {
				return err
			}
			state, added := "done", 0
			for _, st := range steps {
				if st.seq > 0 && st.state != "done" {
					state = "pending"
					added++
				}
			}
			if added > 0 {
				log.Info("another instance's setup recorded post-load steps while this phase ran; the phase is pending again, for the run that copies their tables", "steps", added)
			}
			_, err = tx.ExecContext(ctx, r.dstD.PostLoadState(), state, lease.Token(), r.plan.Name)
			return err
		})
	})
}

// phaseHalted is the error of a post-load phase found halted.
func (r *Runner) phaseHalted() error {
	return fmt.Errorf("%w: the post-load phase of plan %s is halted; fix the cause, then run `migrate resume`", ErrHalted, r.plan.Name)
}

// setPhase records the phase's state, fenced like a batch.
func (r *Runner) setPhase(lease *lock.Lease, state string) error {
	return r.leaseTx(lease, func(ctx context.Context, tx *sql.Tx) error {
		if err := r.fence.CheckLease(ctx, tx, postLoadShard(r.plan), lease); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, r.dstD.PostLoadState(), state, lease.Token(), r.plan.Name)
		return err
	})
}

// postLoadPoll is how often a standby of the post-load phase tries its
// lease.
func (r *Runner) postLoadPoll() time.Duration { return min(r.plan.LeaseTTL/4, time.Second) }

// notePostLoadTakeover records a post-load phase taken over from a holder
// that did not finish it (nor release its lease): its steps done stay
// done, the one it was running is run again (or found done).
func (r *Runner) notePostLoadTakeover(c *claim, log *slog.Logger) {
	wait := c.lease.Wait()
	log.Warn("took over the post-load phase", "previous_owner", c.last.owner, "previous_token", int64(c.last.token), "token", c.lease.Token(), "wait", wait)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.Takeovers = append(r.report.Takeovers, Takeover{Table: postLoadTable, Target: postLoadTable, Token: c.lease.Token(),
		PreviousOwner: c.last.owner, PreviousToken: int64(c.last.token), WaitMs: wait.Milliseconds(), ElectMs: c.took.Milliseconds(),
		RtoMs: (wait + c.took).Milliseconds(), PredictedRtoMs: (r.plan.LeaseTTL + r.postLoadPoll()).Milliseconds()})
}

// runPostLoad runs every step not done yet under lease.
func (r *Runner) runPostLoad(ctx context.Context, lease *lock.Lease, log *slog.Logger, rep *PostLoadReport) error {
	if err := r.scanPool(ctx); err != nil {
		return err
	}
	scan := r.scan
	lctx := lease.Context()
	for i, t := range r.plan.Tables {
		def, err := r.dstD.ReadTable(lctx, scan, t.TargetIdent())
		if err != nil {
			return fmt.Errorf("target table %s: %w", t.Target, err)
		}
		if i < len(r.srcDefs) && r.srcDefs[i] != nil {
			sourceCounters(def, r.srcDefs[i])
		}
		for _, st := range r.dstD.SequenceSteps(def) {
			if err := r.runStep(lctx, scan, st); err != nil {
				return r.haltPostLoad(lease, log, t.Target, st, err)
			}
			rep.Sequences++
		}
	}
	steps, err := r.postLoadSteps(lctx, r.dst)
	if err != nil {
		return err
	}
	for _, st := range steps {
		if st.seq == 0 || st.state == "done" {
			continue
		}
		began := time.Now()
		if err := r.runStep(lctx, scan, st.Step); err != nil {
			return r.haltPostLoad(lease, log, st.table, st.Step, err)
		}
		err := r.leaseTx(lease, func(ctx context.Context, tx *sql.Tx) error {
			if err := r.fence.CheckLease(ctx, tx, postLoadShard(r.plan), lease); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, r.dstD.PostLoadDone(), lease.Token(), r.plan.Name, st.seq)
			return err
		})
		if err != nil {
			return err
		}
		if isObjectStep(st.Kind) {
			rep.Objects++
		} else {
			rep.Steps++
		}
		log.Info("post-load step done", "table", st.table, "kind", st.Kind, "name", st.Name, "elapsed", time.Since(began))
	}
	return r.finishPhase(lease, log)
}

// sourceCounters raises the Next of def's identity columns (the target
// table's) to that of the source's column of the same name: the counter
// the application's next insert would have used in the source, which a
// table whose last rows were deleted keeps above its highest key.
func sourceCounters(def, src *dialect.TableDef) {
	for i, c := range def.Columns {
		j := slices.IndexFunc(src.Columns, func(s dialect.ColumnDef) bool { return s.Name == c.Name && s.Identity != "" })
		if c.Identity != "" && j >= 0 {
			def.Columns[i].Next = max(c.Next, src.Columns[j].Next)
		}
	}
}

// runStep runs one step unless its object exists: a step that fails is
// done all the same when its object exists afterwards (another holder
// created it meanwhile).
func (r *Runner) runStep(ctx context.Context, db *sql.DB, st dialect.Step) error {
	exists := func() (bool, error) {
		if st.Exists == "" {
			return false, nil
		}
		var ok bool
		err := db.QueryRowContext(ctx, st.Exists, st.ExistsArgs...).Scan(&ok)
		return ok, err
	}
	if ok, err := exists(); err != nil || ok {
		return err
	}
	q := st.SQL
	if st.Value != "" {
		var n int64
		if err := db.QueryRowContext(ctx, st.Value, st.ValueArgs...).Scan(&n); err != nil {
			return schema.StmtError("post-load "+st.Kind+" "+st.Name, st.Value, err)
		}
		q = strings.ReplaceAll(q, "{{n}}", strconv.FormatInt(n, 10))
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		if ok, eerr := exists(); eerr == nil && ok {
			return nil
		}
		return schema.StmtError("post-load "+st.Kind+" "+st.Name, q, err)
	}
	return nil
}

// haltPostLoad halts the phase on a step the target refused for good (a
// foreign key the data violates, a unique index over duplicates): running
// it again would fail again. An unavailable target or a lost lease is
// returned as is, for the caller to wait out or be fenced.
func (r *Runner) haltPostLoad(lease *lock.Lease, log *slog.Logger, table string, st dialect.Step, err error) error {
	if lease.Context().Err() != nil || dialect.Classify(err) == dialect.Unavailable {
		return err
	}
	log.Error("a post-load step failed: the post-load phase is halted; fix the cause, then run `migrate resume`", "table", table, "kind", st.Kind, "name", st.Name, "err", err)
	if herr := r.setPhase(lease, "halted"); herr != nil {
		log.Error("could not record the post-load phase halted", "err", herr)
	}
	if table == "" { // a schema object
		return fmt.Errorf("%w: post-load %s %s: %w", ErrHalted, st.Kind, st.Name, err)
	}
	return fmt.Errorf("%w: post-load %s %s of %s: %w", ErrHalted, st.Kind, st.Name, table, err)
}
