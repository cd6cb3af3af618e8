package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/postload"
)

// postLoad runs the plan's post-load phase (postload.Phase) as a leased
// unit, once every shard is done: as its holder, or as its standby until
// another instance has done it.
func (r *Runner) postLoad(ctx context.Context) error {
	start := time.Now()
	p := &postload.Phase{Plan: r.plan, Store: r.steps, SQL: r.dstD, Target: r.dst, Fence: r.unitFence,
		SetupLock: setupLockName(r.plan.Name), Sources: r.srcDefs, Log: r.log,
		Scan: func(ctx context.Context) (*sql.DB, error) {
			err := r.scanPool(ctx)
			return r.scan, err
		},
		OnTakeover: func(c *hold.Claim) {
			r.addTakeover(Takeover{Table: postload.Name, Target: postload.Name, Token: c.Lease.Token(),
				PreviousOwner: c.Previous.Owner, PreviousToken: c.Previous.Token, WaitMs: c.Wait.Milliseconds(), ElectMs: c.Took.Milliseconds(),
				RtoMs: (c.Wait + c.Took).Milliseconds(), PredictedRtoMs: r.PredictedRTO().Milliseconds()})
		},
		Announce: func(ctx context.Context, tx *sql.Tx, done bool, token int64, cause error) error {
			return r.postloadEvent(ctx, tx, done, token, cause)
		}}
	p.Report.ByOther = true
	err := r.loop.Run(ctx, postload.Unit(r.plan.Name), p)
	switch {
	case err == nil && !p.Report.ByOther:
		r.announced("postload.done")
	case errors.Is(err, hold.ErrHalted) && !p.Report.ByOther:
		r.announced("postload.halted")
	}
	rep := p.Report
	rep.ElapsedMs = time.Since(start).Milliseconds()
	r.mu.Lock()
	r.report.PostLoad = &rep
	r.mu.Unlock()
	return err
}

// Resume sets halted shards back to pending (SPEC §6): of one table of the
// plan (source or target name) or all when table is "", of one shard or all
// when shard < 0; with every table, a halted post-load phase too. It
// returns how many it resumed.
func (r *Runner) Resume(ctx context.Context, table string, shard int) (int64, error) {
	target := ""
	if table != "" {
		t, ok := r.plan.Table(table)
		if !ok {
			return 0, fmt.Errorf("%w: the plan has no table %q", plans.ErrInvalid, table)
		}
		target = t.Target
	}
	n, err := r.cursor.Resume(ctx, r.dst, r.plan.Name, target, shard)
	if err == nil && table == "" {
		var m int64
		m, err = r.steps.Resume(ctx, r.dst)
		n += m
	}
	if err == nil {
		r.log.Info("halted shards resumed", "plan", r.plan.Name, "table", table, "shard", shard, "count", n)
	}
	return n, err
}
