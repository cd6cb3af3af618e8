package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
)

// Status reads the plan's durable state: checkpoints and watermarks from the
// target, live leases from Redis. It changes nothing.
func (r *Runner) Status(ctx context.Context) (*Status, error) {
	st := &Status{Plan: r.plan.Name, Tables: []ShardStatus{}, Leases: []LeaseStatus{}}
	var exists bool
	q, args := r.dstD.TableExists([]string{dialect.CheckpointTable})
	if err := r.dst.QueryRowContext(ctx, q, args...).Scan(&exists); err != nil {
		return nil, fmt.Errorf("target %s: %w", r.plan.Target, err)
	}
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
			var last any
			if cp.LastKey != nil {
				last = cp.LastKey
				if len(cp.LastKey) == 1 {
					last = cp.LastKey[0]
				}
			}
			st.Tables = append(st.Tables, ShardStatus{
				Table: cp.Shard.Table, Shard: cp.Shard.Index, State: string(cp.State), RowsDone: cp.RowsDone,
				LastKey: last, Token: int64(cp.Token), UpdatedAt: cp.UpdatedAt.UTC().Format(time.RFC3339Nano),
				Watermark: int64(w), Holder: holder,
			})
		}
	}
	for _, t := range r.plan.Tables {
		for i := 0; i < t.Shards; i++ {
			s := fence.Shard{Plan: r.plan.Name, Table: t.Target, Index: i}
			info, err := r.locker.Inspect(ctx, leaseBase(s))
			if err != nil {
				return nil, fmt.Errorf("redis %s: %w", r.plan.Redis, err)
			}
			if info.Held {
				st.Leases = append(st.Leases, LeaseStatus{Table: t.Target, Shard: i, Owner: info.Owner, Token: info.Token, TTLMs: info.TTL.Milliseconds()})
			}
		}
	}
	return st, nil
}
