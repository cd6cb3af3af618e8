package runner

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/keyset"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/postload"
	"github.com/migrate-dev/migrate/verify"
)

// DryRun is what a run would do, found without a lease and without writing
// anything (SPEC §4 `run --dry-run --json`).
type DryRun struct {
	Plan   string        `json:"plan"`
	DryRun bool          `json:"dry_run"`
	Tables []DryRunTable `json:"tables"`
	// PostLoad are the statements the post-load phase would run after
	// every table's data, in order: sequence resets, then secondary
	// indexes, then foreign keys, then (between two databases of one
	// engine) views, materialized views, routines and triggers.
	PostLoad []string `json:"post_load"`
	// NotMigrated are the source's objects a run does not copy.
	NotMigrated []string `json:"not_migrated"`
	// Error is why the dry run could not finish (with --json, a failed dry
	// run still prints one object).
	Error string `json:"error,omitempty"`
}

// DryRunTable is one table's forecast. Unchanged rows hold the same data in
// the target; a run still rewrites them with its token.
type DryRunTable struct {
	Table       string   `json:"table"`
	Target      string   `json:"target"`
	Key         []string `json:"key"`
	SourceRows  int64    `json:"source_rows"`
	WouldInsert int64    `json:"would_insert"`
	WouldUpdate int64    `json:"would_update"`
	Unchanged   int64    `json:"unchanged"`
	TargetOnly  int64    `json:"target_only"`
	Schema      []string `json:"schema"` // differences between the source and the target's schema
	DDL         []string `json:"ddl"`    // statements the run would execute first, in order
	Notes       []string `json:"notes"`  // what of the source the target would not reproduce, and why
	ReadRowsS   int64    `json:"read_rows_per_s"`
	EstimateMs  int64    `json:"estimate_ms"`
}

// copyVsRead is how much slower a copy runs than a plain read of the
// source, as measured on the reference machine (README): the estimate
// divides the sampled read rate by it.
const copyVsRead = 6

// dryRun is the dry run's forecast of a table's rows and copy time: it
// reads the source and compares it with the target (compare, the Runner's
// verification on its scan pool).
type dryRun struct {
	plan    *plans.Plan
	src     *sql.DB
	srcD    dialect.Dialect
	compare func(ctx context.Context, t plans.Table, src, dst []dialect.Column, rep verify.Reporter) (verify.Result, error)
}

// DryRun compares every table of the plan with its target and lists every
// statement a run would execute, in order. It takes no lease and changes
// nothing.
func (r *Runner) DryRun(ctx context.Context) (*DryRun, error) {
	out := &DryRun{Plan: r.plan.Name, DryRun: true, Tables: []DryRunTable{}, PostLoad: []string{}}
	q, args := r.dstD.TableExists([]string{dialect.CheckpointTable})
	var helpers bool
	if err := r.dst.QueryRowContext(ctx, q, args...).Scan(&helpers); err != nil {
		return nil, fmt.Errorf("target %s: %w", r.plan.Target, err)
	}
	setup := r.newSetup()
	in, err := setup.readSources(ctx)
	if err != nil {
		return nil, err
	}
	recorded, err := r.steps.Recorded(ctx, r.dst)
	if err != nil {
		return nil, err
	}
	fc := dryRun{plan: r.plan, src: r.src, srcD: r.srcD, compare: r.compare}
	var sequences, indexes, fks, objects []string
	recordedObj := map[string]bool{}
	for _, s := range recorded {
		switch {
		case postload.IsObject(s.Kind):
			recordedObj[s.Kind+"\x00"+s.Name] = true
			if s.State != postload.Done {
				objects = append(objects, s.SQL)
			}
		case s.Seq == 0 || s.State == postload.Done:
		case s.Kind == dialect.StepForeignKey:
			fks = append(fks, s.SQL)
		default:
			indexes = append(indexes, s.SQL)
		}
	}
	for _, st := range in.objects.Steps {
		if !recordedObj[st.Kind+"\x00"+st.Name] {
			objects = append(objects, st.SQL)
		}
	}
	tg := setup.target(in.defs, recorded)
	for i, t := range r.plan.Tables {
		dt := DryRunTable{Table: t.Name, Target: t.Target, Key: t.Key, Schema: []string{}, DDL: []string{}}
		if i == 0 && !helpers {
			dt.DDL = append(dt.DDL, r.dstD.Helpers()...)
			if r.lockInTarget { // created by the first lease (lock/dblock)
				dt.DDL = append(dt.DDL, r.dstD.LeaseTable())
			}
		}
		p, err := tg.Prepare(ctx, r.dst, t, in.cols[i], in.defs[i])
		if err != nil {
			return nil, fmt.Errorf("target table %s: %w", t.Target, err)
		}
		dt.DDL = append(dt.DDL, p.DDL...)
		for _, name := range slices.Sorted(maps.Keys(p.DropFKs)) {
			dt.DDL = append(dt.DDL, p.DropFKs[name])
		}
		dt.Notes = append([]string{}, p.Notes...)
		if p.Created {
			dt.Schema = append(dt.Schema, "target table "+t.Target+" does not exist: the run creates it")
		} else {
			dt.Schema = append(dt.Schema, schemaDiff(p.Src, p.Dst, r.plan.FenceColumn, len(p.DDL) > 0, r.srcD.Engine() == r.dstD.Engine())...)
		}
		postload.SourceCounters(p.Def, in.defs[i])
		for _, st := range r.dstD.SequenceSteps(p.Def) {
			sequences = append(sequences, st.SQL)
		}
		for _, st := range p.Steps {
			if st.Kind == dialect.StepForeignKey {
				fks = append(fks, st.SQL)
			} else {
				indexes = append(indexes, st.SQL)
			}
		}
		if err := fc.forecast(ctx, &dt, p.Src, p.Dst, p.Created, t.Key); err != nil {
			return nil, err
		}
		out.Tables = append(out.Tables, dt)
	}
	out.PostLoad = slices.Concat(out.PostLoad, sequences, indexes, fks, objects)
	if out.NotMigrated, err = setup.notMigrated(ctx, in); err != nil {
		return nil, err
	}
	return out, nil
}

// forecast fills the row counts (a verification against the target, or
// the source count for a table to be created) and the duration estimate.
func (d dryRun) forecast(ctx context.Context, dt *DryRunTable, cols, dst []dialect.Column, created bool, key []string) error {
	t, _ := d.plan.Table(dt.Table)
	if created {
		if err := d.src.QueryRowContext(ctx, d.srcD.CountRows(t.SourceIdent())).Scan(&dt.SourceRows); err != nil {
			return fmt.Errorf("count source %s: %w", t.Name, err)
		}
		dt.WouldInsert = dt.SourceRows
	} else {
		res, err := d.compare(ctx, t, cols, dst, nil)
		if err != nil {
			return err
		}
		dt.SourceRows = res.SourceRows
		dt.WouldInsert, dt.WouldUpdate, dt.TargetOnly = res.Missing, res.Changed, res.Extra
		dt.Unchanged = res.SourceRows - res.Missing - res.Changed
	}
	rate, err := d.sampleReadRate(ctx, t.SourceIdent(), cols, key)
	if err != nil {
		return err
	}
	dt.ReadRowsS = int64(rate)
	if rate > 0 {
		dt.EstimateMs = int64(float64(dt.SourceRows) / (rate / copyVsRead) * 1000)
	}
	return nil
}

// sampleReadRate reads up to 20 keyset pages of the source the way a run
// does and returns rows per second.
func (d dryRun) sampleReadRate(ctx context.Context, table []string, cols []dialect.Column, key []string) (float64, error) {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	rd := keyset.Reader{DB: d.src, SQL: dialect.WithColumns(d.srcD, table, cols), Table: table, Columns: names, Key: key, Limit: d.plan.BatchSize}
	keyIdx, err := keyset.KeyIndexes(names, key)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	var n int64
	var after []any
	for range 20 {
		rows, err := rd.Page(ctx, after)
		if err != nil {
			return 0, err
		}
		if len(rows) == 0 {
			break
		}
		n += int64(len(rows))
		after = keyset.KeyOf(rows[len(rows)-1], keyIdx)
	}
	if n == 0 {
		return 0, nil
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// schemaDiff lists what differs between the source columns and the
// existing target's, as a run would see it; types are compared between
// tables of one engine only (across engines they differ by design: see the
// type mapping).
func schemaDiff(src, dst []dialect.Column, fence string, addFence, sameEngine bool) []string {
	var out []string
	if addFence {
		out = append(out, "target table lacks the fence column "+fence+": the run adds it")
	}
	for i := range src {
		if sameEngine && src[i].Type != dst[i].Type {
			out = append(out, fmt.Sprintf("column %s: source %s, target %s", src[i].Name, src[i].Type, dst[i].Type))
		}
		if src[i].NotNull && !dst[i].NotNull {
			out = append(out, fmt.Sprintf("column %s: NOT NULL in the source only", src[i].Name))
		}
	}
	return out
}
