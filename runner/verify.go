package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/schema"
	"github.com/migrate-dev/migrate/verify"
)

// Verify compares every table of the plan (or the one named, by source or
// target name) row by row, source against target.
func (r *Runner) Verify(ctx context.Context, only string) (v *Verification, err error) {
	return r.VerifyLive(ctx, only, 0, 0)
}

// VerifyLive is Verify while a change stream applies the source's changes:
// a table found differing is compared again, up to rounds more times,
// pause apart, and only the rows found differing every time are reported
// (a row in flight — changed at the source, not yet applied — differs
// once, not every time).
func (r *Runner) VerifyLive(ctx context.Context, only string, rounds int, pause time.Duration) (v *Verification, err error) {
	v = &Verification{Equal: true, Tables: []verify.Result{}}
	defer func() {
		if err != nil {
			v.Equal = false // a check that failed proves nothing
		}
	}()
	if only != "" {
		if _, ok := r.plan.Table(only); !ok {
			return v, fmt.Errorf("%w: the plan has no table %q", plans.ErrInvalid, only)
		}
	}
	if err := r.scanPool(ctx); err != nil {
		return v, err
	}
	for _, t := range r.plan.Tables {
		if only != "" && t.Name != only && t.Target != only {
			continue
		}
		src, dst, err := r.copiedColumns(ctx, t)
		if err != nil {
			return v, err
		}
		var rep verify.Reporter
		if p := r.opts.Progress; p != nil {
			q, args := r.srcD.EstimateRows(t.SourceIdent())
			var total int64
			_ = r.src.QueryRowContext(ctx, q, args...).Scan(&total)
			p.Start("verifying "+t.Name, total, 0)
			rep = &progressReport{p: p}
		}
		live := &liveKeys{}
		if rounds > 0 {
			rep = live.with(rep)
		}
		res, err := r.compare(ctx, t, src, dst, rep)
		if p := r.opts.Progress; p != nil {
			p.Finish()
		}
		for round := 1; err == nil && round <= rounds && !res.Equal(); round++ {
			select {
			case <-ctx.Done():
				return v, context.Cause(ctx)
			case <-time.After(pause):
			}
			next := &liveKeys{}
			if res, err = r.compare(ctx, t, src, dst, next); err == nil {
				live.keep(next)
				res = live.result(res)
				r.log.Info("verification, live: compared again", "table", t.Name, "round", round, "still_differing", res.Missing+res.Extra+res.Changed)
			}
		}
		if err != nil {
			return v, err
		}
		r.log.Info("verification", "table", t.Name, "source_rows", res.SourceRows, "target_rows", res.TargetRows,
			"missing", res.Missing, "extra", res.Extra, "changed", res.Changed)
		r.opts.Metrics.VerifyDifferences(t.Target, res.Missing, res.Extra, res.Changed)
		v.Tables = append(v.Tables, res)
		v.Equal = v.Equal && res.Equal()
	}
	return v, nil
}

// progressReport moves the progress bar as rows are compared.
type progressReport struct {
	p    ProgressBar
	seen int64
}

func (pr *progressReport) Compared(n int64)            { pr.p.Add(n - pr.seen); pr.seen = n }
func (pr *progressReport) Differs(string, []any) error { return nil }

// compare verifies one table (verify.Compare): the source against the
// target's scan pool, told to rep (may be nil).
func (r *Runner) compare(ctx context.Context, t plans.Table, src, dst []dialect.Column, rep verify.Reporter) (verify.Result, error) {
	if err := r.scanPool(ctx); err != nil {
		return verify.Result{}, err
	}
	return verify.Compare(ctx,
		verify.Side{DB: r.src, SQL: r.srcD, Table: t.SourceIdent(), Columns: src},
		verify.Side{DB: r.scan, SQL: r.dstD, Table: t.TargetIdent(), Columns: dst},
		verify.Options{Name: t.Name, Key: t.Key, Report: rep})
}

// scanPool opens the target pool for whole-table reads: long scans must not
// meet the lease sessions' statement timeouts.
func (r *Runner) scanPool(ctx context.Context) error {
	r.scanMu.Lock()
	defer r.scanMu.Unlock()
	if r.scan != nil {
		return nil
	}
	var err error
	if r.scan, err = r.openScan(ctx); err != nil {
		return fmt.Errorf("target %s: %w", r.plan.Target, err)
	}
	return nil
}

// copiedColumns returns the columns a copy of table t writes (every
// source column the plan names but those the target generates,
// schema.Copied): the source's definitions and the target's, in the same
// order.
func (r *Runner) copiedColumns(ctx context.Context, t plans.Table) (src, dst []dialect.Column, err error) {
	if src, err = schema.SourceColumns(ctx, r.src, r.srcD, t, r.plan.FenceColumn); err != nil {
		return nil, nil, err
	}
	if err := r.scanPool(ctx); err != nil {
		return nil, nil, err
	}
	def, err := r.srcD.ReadTable(ctx, r.src, t.SourceIdent())
	if err != nil {
		return nil, nil, fmt.Errorf("source table %s: %w", t.Name, err)
	}
	own, err := r.dstD.ReadTable(ctx, r.scan, t.TargetIdent())
	if err != nil {
		return nil, nil, fmt.Errorf("target table %s: %w", t.Target, err)
	}
	src, _ = schema.Copied(src, def, own)
	all, err := schema.Columns(ctx, r.scan, r.dstD, t.TargetIdent())
	if err != nil {
		return nil, nil, fmt.Errorf("target table %s: %w", t.Target, err)
	}
	if dst, err = schema.Align(all, src); err != nil {
		return nil, nil, fmt.Errorf("target table %s: %w", t.Target, err)
	}
	return src, dst, nil
}

// liveKeys are the differences of a comparison, by kind and key, to be
// intersected with those of the next one (VerifyLive).
type liveKeys struct {
	next  verify.Reporter // the reporter it stands in front of; may be nil
	diffs map[string]string
	full  bool // more differences than kept: no intersection is possible
}

// liveCap bounds the differences a live verification keeps per table.
const liveCap = 100000

func (l *liveKeys) with(rep verify.Reporter) verify.Reporter { l.next = rep; return l }

func (l *liveKeys) Compared(n int64) {
	if l.next != nil {
		l.next.Compared(n)
	}
}

func (l *liveKeys) Differs(kind string, key []any) error {
	if l.diffs == nil {
		l.diffs = map[string]string{}
	}
	if len(l.diffs) < liveCap {
		l.diffs[kind+"|"+fmt.Sprint(key...)] = kind
	} else {
		l.full = true
	}
	if l.next != nil {
		return l.next.Differs(kind, key)
	}
	return nil
}

// keep keeps the differences found again in next.
func (l *liveKeys) keep(next *liveKeys) {
	if l.full || next.full {
		l.diffs, l.full = next.diffs, true
		return
	}
	for k := range l.diffs {
		if _, ok := next.diffs[k]; !ok {
			delete(l.diffs, k)
		}
	}
}

// result is res counting only the differences kept (all of res's when
// too many were found to intersect them); without any, no sample either.
func (l *liveKeys) result(res verify.Result) verify.Result {
	if l.full {
		return res
	}
	res.Missing, res.Extra, res.Changed = 0, 0, 0
	for _, kind := range l.diffs {
		switch kind {
		case "missing":
			res.Missing++
		case "extra":
			res.Extra++
		default:
			res.Changed++
		}
	}
	if res.Equal() {
		res.Samples = []verify.Sample{}
	}
	return res
}
