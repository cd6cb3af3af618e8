package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/plans"
)

// Status reads the plan's durable state: checkpoints, watermarks,
// takeovers and the holders' pace from the target; live leases from the
// lock service. It changes nothing.
func (r *Runner) Status(ctx context.Context) (*Status, error) {
	st := &Status{Plan: r.plan.Name, Tables: []ShardStatus{}, Leases: []LeaseStatus{}, Totals: []TableTotal{}}
	var exists bool
	q, args := r.dstD.TableExists([]string{dialect.CheckpointTable})
	if err := r.dst.QueryRowContext(ctx, q, args...).Scan(&exists); err != nil {
		return nil, fmt.Errorf("target %s: %w", r.plan.Target, err)
	}
	if exists {
		if err := r.resolveShards(ctx); err != nil {
			return nil, err
		}
	}
	holders, err := r.leases(ctx, st)
	if err != nil {
		return nil, err
	}
	estimates := map[string]int64{}
	if exists {
		cps, err := r.cursor.List(ctx, r.dst, r.plan.Name)
		if err != nil {
			return nil, err
		}
		for _, cp := range cps {
			w, holder, err := r.fence.Watermark(ctx, r.dst, cp.Shard)
			if err != nil {
				return nil, err
			}
			name := cp.Shard.Table
			if t, ok := r.plan.Table(cp.Shard.Table); ok {
				name = t.Name
			}
			n, last, err := r.records.Takeovers(ctx, cp.Shard, r.plan.TakeoverWindow)
			if err != nil {
				return nil, fmt.Errorf("target %s: %w", r.plan.Target, err)
			}
			lastJSON := json.RawMessage("null")
			if json.Valid([]byte(last)) {
				lastJSON = json.RawMessage(last)
			}
			ss := ShardStatus{
				Table: name, Target: cp.Shard.Table, Shard: cp.Shard.Index, LastKey: lastKeyJSON(cp.LastText), State: string(cp.State), RowsDone: cp.RowsDone,
				Token: int64(cp.Token), UpdatedAt: cp.UpdatedAt.UTC().Format(time.RFC3339Nano),
				Watermark: int64(w), Holder: holder, Takeovers: n, LastTakeover: lastJSON,
			}
			switch p, ok, err := r.records.ReadProgress(ctx, cp.Shard); {
			case err != nil:
				return nil, fmt.Errorf("target %s: %w", r.plan.Target, err)
			case cp.State == cursor.Done:
				ss.EtaMs = new(int64(0))
				if ok && p.TableRows > 0 {
					estimates[cp.Shard.Table] = p.TableRows
				}
			case ok && cp.State == cursor.Running && p.Owner == holders[cp.Shard]:
				ss.RowsPerSec = new(p.RowsPerSec)
				if p.EtaMs >= 0 {
					ss.EtaMs = new(p.EtaMs)
				}
				if p.TableRows > 0 {
					estimates[cp.Shard.Table] = p.TableRows
				}
			}
			st.Tables = append(st.Tables, ss)
		}
	}
	for _, t := range r.plan.Tables {
		st.Totals = append(st.Totals, total(t, st.Tables, estimates))
	}
	steps, err := r.recordedSteps(ctx, r.dst)
	if err != nil {
		return nil, err
	}
	if len(steps) > 0 {
		st.PostLoad = &PostLoadStatus{State: steps[0].state, Steps: len(steps) - 1}
		for _, s := range steps[1:] {
			if s.state == "done" {
				st.PostLoad.StepsDone++
			}
		}
	}
	return st, nil
}

// total sums the shards of table t.
func total(t plans.Table, shards []ShardStatus, estimates map[string]int64) TableTotal {
	tt := TableTotal{Table: t.Name, Target: t.Target, Shards: t.Shards}
	var perSec float64
	rated := false
	for _, s := range shards {
		if s.Target != t.Target {
			continue
		}
		tt.RowsDone += s.RowsDone
		switch s.State {
		case string(cursor.Done):
			tt.ShardsDone++
		case string(cursor.Running):
			tt.ShardsRunning++
			if s.RowsPerSec != nil {
				perSec += *s.RowsPerSec
				rated = true
			}
		}
	}
	if est, ok := estimates[t.Target]; ok {
		tt.RowsEstimated = new(max(est, tt.RowsDone))
	}
	switch {
	case tt.ShardsDone == tt.Shards:
		tt.EtaMs = new(int64(0))
	case rated:
		tt.RowsPerSec = new(perSec)
		if tt.RowsEstimated != nil && perSec > 0 {
			tt.EtaMs = new(int64(float64(*tt.RowsEstimated-tt.RowsDone) / perSec * 1000))
		}
	}
	return tt
}

// lastKeyJSON shows a stored cursor as JSON: a one-part key as its value
// (numbers stay numbers), a composite key as an array, none as null.
func lastKeyJSON(text string) json.RawMessage {
	var parts []json.RawMessage
	if text == "" || json.Unmarshal([]byte(text), &parts) != nil {
		return json.RawMessage("null")
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return json.RawMessage(text)
}

// leases lists the shards' live leases in st and returns their holders.
func (r *Runner) leases(ctx context.Context, st *Status) (map[fence.Shard]string, error) {
	holders := map[fence.Shard]string{}
	for _, t := range r.plan.Tables {
		for i := 0; i < t.Shards; i++ {
			s := fence.Shard{Plan: r.plan.Name, Table: t.Target, Index: i}
			info, err := r.locker.Inspect(ctx, leaseBase(s))
			if err != nil {
				return nil, fmt.Errorf("lock %s: %w", r.locker, err)
			}
			if info.Held {
				holders[s] = info.Owner
				st.Leases = append(st.Leases, LeaseStatus{Table: t.Name, Target: t.Target, Shard: i, Owner: info.Owner, Token: info.Token, TTLMs: info.TTL.Milliseconds()})
			}
		}
	}
	return holders, nil
}

// Resume sets halted shards back to pending (SPEC §6): of one table of the
// plan (source or target name) or all when table is "", of one shard or all
// when shard < 0. It returns how many it resumed.
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
		m, err = r.resumePostLoad(ctx)
		n += m
	}
	if err == nil {
		r.log.Info("halted shards resumed", "plan", r.plan.Name, "table", table, "shard", shard, "count", n)
	}
	return n, err
}

// leaseShards are the shards whose leases the plan takes: every table's,
// and its post-load phase's.
func (r *Runner) leaseShards() []fence.Shard {
	var out []fence.Shard
	for _, t := range r.plan.Tables {
		for i := range t.Shards {
			out = append(out, fence.Shard{Plan: r.plan.Name, Table: t.Target, Index: i})
		}
	}
	return append(out, postLoadShard(r.plan))
}

// RememberedLeases counts the plan's leases that the lock service keeps a
// holder of, present or past: a drill starts from none.
func (r *Runner) RememberedLeases(ctx context.Context) (int, error) {
	n := 0
	for _, s := range r.leaseShards() {
		info, err := r.locker.Inspect(ctx, leaseBase(s))
		if err != nil {
			return 0, fmt.Errorf("lock %s: %w", r.locker, err)
		}
		if info.Held || info.Last.Owner != "" {
			n++
		}
	}
	return n, nil
}

// ForgetLeases deletes what the lock service keeps of the plan's leases
// (a drill's --reset, with the target's rows of the plan); a held lease
// is an error.
func (r *Runner) ForgetLeases(ctx context.Context) error {
	for _, s := range r.leaseShards() {
		if err := r.locker.Forget(ctx, leaseBase(s)); err != nil {
			return fmt.Errorf("lock %s: %w", r.locker, err)
		}
	}
	return nil
}
