package drill

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/runner"
	"github.com/migrate-dev/migrate/status"
)

// collect fills the report from the instances' reports, the target and a
// final verification.
func (d *drill) collect(ctx context.Context) {
	rep := d.rep
	if d.w != nil {
		rep.History = d.w.events()
	}
	for _, c := range d.children() {
		in := Instance{Name: c.name, Role: c.role, Killed: c.killed, Exit: -1, Shards: []runner.ShardResult{}}
		if c.exited() {
			in.Exit = c.exitCode()
		}
		if r := c.report(); r != nil {
			in.report, in.Owner, in.Error, in.Shards = r, r.Owner, r.Error, r.Shards
			in.RowsWritten, in.ReplayedRows, in.StaleRejections, in.Takeovers = r.RowsWritten, r.ReplayedRows, r.StaleRejections, len(r.Takeovers)
			for _, t := range r.Takeovers {
				rep.Takeovers = append(rep.Takeovers, Takeover{Instance: c.name, Takeover: t})
				rep.RtoMs, rep.PredictedRtoMs = max(rep.RtoMs, t.RtoMs), t.PredictedRtoMs
			}
		}
		if c == d.holder && in.Owner == "" {
			in.Owner = d.owner
		}
		if in.Owner == "" { // killed: the owner its leases showed
			for _, e := range rep.History {
				if e.Owner != "" && label(e.Owner) == c.name {
					in.Owner = e.Owner
					break
				}
			}
		}
		rep.ReplayedRows += in.ReplayedRows
		rep.StaleRejections += in.StaleRejections
		rep.Instances = append(rep.Instances, in)
	}
	if b := int64(rep.BatchSize); b > 0 {
		rep.ReplayedBatches = (rep.ReplayedRows + b - 1) / b
	}
	if d.status == nil || ctx.Err() != nil {
		return
	}
	if s := rep.Stream; s != nil && s.Cutover != nil && s.Cutover.Verify != nil {
		rep.Verify = s.Cutover.Verify // the cutover's, with the writes stopped
	} else {
		d.verify(ctx)
	}
	if d.hook != nil { // before the outcomes: the takeovers of the killed standby are in its events
		if err := d.collectNotify(ctx); err != nil {
			rep.Error = strings.TrimPrefix(rep.Error+"; ", "; ") + err.Error()
		}
	}
	if err := d.outcomes(ctx); err != nil {
		rep.Error = strings.TrimPrefix(rep.Error+"; ", "; ") + err.Error()
	}
	d.rep.HandoverMs = d.handover()
	if rep.Stream != nil {
		d.collectStream(ctx)
	}
	if d.o.Kind == LateWrite && d.late.Chunks > 0 {
		rep.LateWrite = &Late{HeldBytes: d.late.Bytes, HeldChunks: d.late.Chunks,
			HeldMs: d.late.Released.Sub(d.late.First).Milliseconds(), DeliveredAfterTakeoverMs: -1}
		if !d.taken.IsZero() {
			rep.LateWrite.DeliveredAfterTakeoverMs = d.late.Released.Sub(d.taken).Milliseconds()
		}
	}
}

// handover is the time from the fault until the history shows every shard's
// watermark claimed by another instance than the holder; 0 if it never was.
func (d *drill) handover() int64 {
	if d.faultAt.IsZero() || len(d.tokens) == 0 {
		return 0
	}
	from := d.faultAt.Sub(d.start).Milliseconds()
	claimed := map[shardKey]int64{}
	for _, e := range d.rep.History {
		k := shardKey{e.Table, e.Shard}
		if _, held := d.tokens[k]; held && e.Kind == "fence" && e.AtMs >= from && e.Owner != d.owner {
			if _, seen := claimed[k]; !seen {
				claimed[k] = e.AtMs - from
			}
		}
	}
	if len(claimed) < len(d.tokens) {
		return 0
	}
	var worst int64
	for _, ms := range claimed {
		worst = max(worst, ms)
	}
	return worst
}

// outcomes works out, per shard the holder held, who finished it and what
// stale writes the target kept.
func (d *drill) outcomes(ctx context.Context) error {
	// The lock service a lock-restart drill restarted may close a
	// client's connection once more: an outage waited out briefly.
	var st *status.Status
	err := retry.Do(ctx, &retry.Budget{MaxOutage: 10 * time.Second}, func() (err error) {
		st, err = d.status.Read(ctx)
		return err
	}, func(error) retry.Kind { return retry.Outage }, nil)
	if err != nil {
		return err
	}
	if len(d.rep.Instances) == 0 {
		return nil
	}
	holder := d.rep.holder().report
	// The shards the holder held at the fault, in the plan's order (a
	// plan's shards: auto are known from the checkpoints only).
	held := slices.SortedFunc(maps.Keys(d.tokens), func(a, b shardKey) int {
		return cmp.Or(cmp.Compare(d.tableOrder(a.table), d.tableOrder(b.table)), cmp.Compare(a.shard, b.shard))
	})
	for _, sk := range held {
		tok := d.tokens[sk]
		o := ShardOutcome{Table: sk.table, Shard: sk.shard, HolderToken: tok, HolderRows: -1}
		for _, t := range st.Tables {
			if t.Table == sk.table && t.Shard == sk.shard {
				o.FinalToken, o.FinalState = t.Token, t.State
			}
		}
		// The successor: the lowest token above the holder's that wrote
		// the shard (or, in the notify drill, took it over: the killed
		// standby printed no report).
		succeed := func(token int64) {
			if token > tok && (o.Successor == 0 || token < o.Successor) {
				o.Successor = token
			}
		}
		for _, in := range d.rep.Instances[1:] {
			if in.report == nil {
				continue
			}
			for _, s := range in.report.Shards {
				if s.Table == sk.table && s.Shard == sk.shard && !s.ByOther {
					succeed(s.Token)
				}
			}
		}
		if n := d.rep.Notify; n != nil {
			for _, t := range n.TakenOver {
				if t.Table == sk.table && t.Shard == sk.shard {
					succeed(t.Token)
				}
			}
		}
		if holder != nil {
			o.HolderRows = 0
			for _, s := range holder.Shards {
				if s.Table == sk.table && s.Shard == sk.shard && s.Token == tok {
					o.HolderRows += s.Rows
				}
			}
		}
		if o.Successor != 0 {
			if err := d.stale(ctx, &o); err != nil {
				return err
			}
		}
		d.rep.StaleWritesAccepted += o.StaleCommitted + o.StaleAfterResume
		d.rep.Shards = append(d.rep.Shards, o)
	}
	return nil
}

// stale counts the stale writes the target kept in one handed-over shard.
func (d *drill) stale(ctx context.Context, o *ShardOutcome) error {
	tb, _ := d.plan.Table(o.Table)
	r, err := d.tgt.bounds(ctx, tb, o.Shard)
	if err != nil {
		return err
	}
	if _, o.OlderRows, err = d.tgt.count(ctx, tb, r, nil, o.Successor); err != nil {
		return err
	}
	if o.HolderRows > o.OlderRows {
		o.StaleCommitted = o.HolderRows - o.OlderRows
	}
	for _, t := range d.rep.Takeovers {
		if t.Table != o.Table || t.Shard != o.Shard {
			continue
		}
		var after []any
		if t.ResumeKey != "" {
			if after, err = cursor.DecodeKey(t.ResumeKey); err != nil {
				return err
			}
		}
		_, older, err := d.tgt.count(ctx, tb, r, after, t.Token)
		if err != nil {
			return err
		}
		if d.o.Kind.streams() {
			// The rows the change stream wrote carry token 0: no
			// holder's, and newer than the copy's.
			_, applied, err := d.tgt.count(ctx, tb, r, after, 1)
			if err != nil {
				return err
			}
			older -= applied
		}
		o.StaleAfterResume += older
	}
	return nil
}

// verify runs the final verification of the plan, as `migrate verify`.
func (d *drill) verify(ctx context.Context) {
	r, err := d.o.OpenRunner(ctx, d.plan, runner.Options{Log: d.log}, false)
	if err == nil {
		defer r.Close()
		d.rep.Verify, err = r.Verify(ctx, "")
	}
	if err != nil {
		d.rep.Verify = nil
		d.rep.Error = strings.TrimPrefix(d.rep.Error+"; ", "; ") + "verification: " + err.Error()
	}
}

// tableOrder is the position of a table in the plan.
func (d *drill) tableOrder(name string) int {
	return slices.IndexFunc(d.plan.Tables, func(t plans.Table) bool { return t.Name == name })
}
