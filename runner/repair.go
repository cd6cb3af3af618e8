package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// maxRepairKeys bounds the differences one repair takes on; beyond it a
// fresh copy is the better tool.
const maxRepairKeys = 1_000_000

// RepairReport says what a repair did, and the verification after it.
type RepairReport struct {
	Plan   string        `json:"plan"`
	Tables []RepairTable `json:"tables"`
	Verify *Verification `json:"verify"`
}

// RepairTable is one table's repair.
type RepairTable struct {
	Table     string `json:"table"`
	Recopied  int64  `json:"recopied"`   // missing and changed rows copied again from the source
	Deleted   int64  `json:"deleted"`    // target-only rows deleted (--delete-extra)
	ExtraLeft int64  `json:"extra_left"` // target-only rows left in place
}

// Repair fixes what verification finds, table by table, holding every
// shard's lease and claiming its fence like a takeover: missing and changed
// rows are copied again from the source; rows only in the target are
// deleted only when deleteExtra. Then it verifies again.
func (r *Runner) Repair(ctx context.Context, only string, deleteExtra bool) (*RepairReport, error) {
	rep := &RepairReport{Plan: r.plan.Name, Tables: []RepairTable{}}
	if only != "" {
		if _, ok := r.plan.Table(only); !ok {
			return rep, fmt.Errorf("%w: the plan has no table %q", plans.ErrInvalid, only)
		}
	}
	if err := r.scanPool(ctx); err != nil {
		return rep, err
	}
	for _, t := range r.plan.Tables {
		if only != "" && t.Name != only && t.Target != only {
			continue
		}
		rt, err := (&repairRun{r: r, t: t}).run(ctx, deleteExtra)
		if err != nil {
			return rep, err
		}
		rep.Tables = append(rep.Tables, rt)
	}
	v, err := r.Verify(ctx, only)
	rep.Verify = v
	if err == nil {
		r.announceVerified(ctx, v, only == "")
	}
	return rep, err
}

// repairRun is the repair of one table: the shards it holds, and the
// spec and copier that write its rows again.
type repairRun struct {
	r    *Runner
	t    plans.Table
	held []*claim
	spec batch.Spec
	c    *batch.Copier
}

// run repairs the table: it holds every shard, lists the differences,
// copies missing and changed rows again and, when deleteExtra, deletes the
// rows only in the target; then gives the shards back.
func (rr *repairRun) run(ctx context.Context, deleteExtra bool) (RepairTable, error) {
	r, t := rr.r, rr.t
	rt := RepairTable{Table: t.Name}
	cols, dst, err := r.copiedColumns(ctx, t)
	if err != nil {
		return rt, err
	}
	err = rr.holdAll(ctx)
	defer func() {
		for _, h := range rr.held {
			r.loop.Release(ctx, h.Lease)
		}
	}()
	if err != nil {
		return rt, err
	}
	recopy, extra, err := rr.differences(ctx, cols, dst)
	if err != nil {
		return rt, err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	rr.spec = batch.Spec{Source: t.SourceIdent(), Target: t.TargetIdent(), Columns: names, Key: t.Key,
		FenceColumn: r.plan.FenceColumn, Convert: typemap.Converter(r.srcD.Engine(), r.dstD.Engine(), cols, dst)}
	rr.c = r.copier()
	rr.c.OnBatch = nil
	rr.c.SourceSQL = dialect.WithColumns(r.srcD, rr.spec.Source, cols)
	if rt.Recopied, err = rr.recopy(ctx, recopy); err != nil || !deleteExtra {
		rt.ExtraLeft = int64(len(extra))
		return rt, err
	}
	rt.Deleted, err = rr.deleteExtra(ctx, extra)
	return rt, err
}

// differences lists the keys of the rows to copy again (missing or
// changed in the target) and of the rows only in the target.
func (rr *repairRun) differences(ctx context.Context, cols, dst []dialect.Column) (recopy, extra [][]any, err error) {
	d := &diffKeys{table: rr.t.Name}
	_, err = rr.r.compare(ctx, rr.t, cols, dst, d)
	return d.recopy, d.extra, err
}

// diffKeys collects the keys of a comparison's differences, up to
// maxRepairKeys.
type diffKeys struct {
	table         string
	recopy, extra [][]any
}

func (d *diffKeys) Compared(int64) {}

func (d *diffKeys) Differs(kind string, key []any) error {
	if len(d.recopy)+len(d.extra) >= maxRepairKeys {
		return fmt.Errorf("more than %d differences in %s: copy the table again with a new plan name instead", maxRepairKeys, d.table)
	}
	if kind == "extra" {
		d.extra = append(d.extra, key)
	} else {
		d.recopy = append(d.recopy, key)
	}
	return nil
}

// recopy copies the rows with the given keys again from the source, each
// by the fenced write of the shard whose range holds it.
func (rr *repairRun) recopy(ctx context.Context, keys [][]any) (n int64, err error) {
	r, c, spec, held := rr.r, rr.c, rr.spec, rr.held
	for _, chunk := range chunked(keys, r.plan.BatchSize) {
		rows, err := c.Reader(spec).ByKeys(ctx, chunk)
		if err != nil {
			return n, fmt.Errorf("read %d rows of %s by key: %w", len(chunk), strings.Join(spec.Source, "."), err)
		}
		for i, group := range byShard(rows, keyCol(spec.Columns, spec.Key[0]), held) {
			if len(group) == 0 {
				continue
			}
			h := held[i]
			spec.Shard = h.cp.Shard
			ins, upd, err := c.WriteRows(ctx, spec, h.Lease, group)
			if err != nil {
				return n, r.loop.Fenced(ctx, h.Claim, err)
			}
			n += ins + upd
		}
	}
	return n, nil
}

// deleteExtra deletes the target rows with the given keys, each by the
// fenced write of the shard whose range holds it.
func (rr *repairRun) deleteExtra(ctx context.Context, keys [][]any) (n int64, err error) {
	r, c, spec, held := rr.r, rr.c, rr.spec, rr.held
	for _, chunk := range chunked(keys, r.plan.BatchSize) {
		for i, group := range byShard(chunk, 0, held) {
			if len(group) == 0 {
				continue
			}
			h := held[i]
			spec.Shard = h.cp.Shard
			d, err := c.DeleteRows(spec, h.Lease, group)
			if err != nil {
				return n, r.loop.Fenced(ctx, h.Claim, err)
			}
			n += d
		}
	}
	return n, nil
}

// claim is a shard repair holds, with its checkpoint as the claim read it.
type claim struct {
	*hold.Claim
	cp cursor.Checkpoint
}

// holdAll takes the lease of every shard of the table and claims its
// fence, as a takeover does; a shard held by a running instance stops the
// repair. What it holds, also when it fails, is in rr.held.
func (rr *repairRun) holdAll(ctx context.Context) error {
	r, t := rr.r, rr.t
	cps, err := r.cursor.List(ctx, r.dst, r.plan.Name)
	if err != nil {
		return err
	}
	for _, cp := range cps {
		if cp.Shard.Table != t.Target {
			continue
		}
		w := &shardWork{r: r, log: r.log.With("shard", cp.Shard.String())}
		w.j.spec.Shard = cp.Shard
		c, err := r.loop.Hold(ctx, cp.Shard, w)
		var h *lock.HeldError
		switch {
		case errors.As(err, &h):
			return fmt.Errorf("shard %s is held by %s: repair once the run has finished", cp.Shard, h.Owner)
		case err != nil:
			if c != nil {
				r.loop.Release(ctx, c.Lease)
			}
			return err
		}
		rr.held = append(rr.held, &claim{c, w.cp})
	}
	if len(rr.held) == 0 {
		return fmt.Errorf("table %s has no checkpoints in the target: run the plan first", t.Name)
	}
	return nil
}

// byShard groups rows by the shard whose range holds the value of column
// col (the first key column), in the order of held.
func byShard(rows [][]any, col int, held []*claim) [][][]any {
	out := make([][][]any, len(held))
	if len(held) == 1 {
		out[0] = rows
		return out
	}
	for _, row := range rows {
		v := asInt(row[col])
		for i, h := range held {
			if (h.cp.Lo == nil || v > asInt(h.cp.Lo)) && (h.cp.Hi == nil || v <= asInt(h.cp.Hi)) {
				out[i] = append(out[i], row)
				break
			}
		}
	}
	return out
}

// asInt reads an integer key part as a driver or the cursor gives it.
func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case []byte:
		n, _ := strconv.ParseInt(string(x), 10, 64)
		return n
	}
	n, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	return n
}

func keyCol(names []string, k string) int {
	for i, n := range names {
		if n == k {
			return i
		}
	}
	return 0
}

func chunked(keys [][]any, n int) [][][]any {
	var out [][][]any
	for len(keys) > 0 {
		m := min(n, len(keys))
		out = append(out, keys[:m])
		keys = keys[m:]
	}
	return out
}
