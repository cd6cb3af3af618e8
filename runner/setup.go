package runner

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/postload"
	"github.com/migrate-dev/migrate/schema"
	"github.com/migrate-dev/migrate/typemap"
)

// shardJob is one shard of one table, with the source's and the target's
// definitions of the copied columns.
type shardJob struct {
	table    plans.Table
	spec     batch.Spec
	src, dst []dialect.Column
	read     []dialect.Column // the source's columns the plan names, as setup read them (src less those the target generates)
}

// setup prepares the target for every table (C4) — helper tables, the
// target table if missing, the fence column, the post-load steps,
// checkpoints with shard bounds — under a setup lock, so competing
// instances agree on the result. It returns the shard jobs.
func (r *Runner) setup(ctx context.Context) ([]shardJob, error) {
	// First every table is checked, changing nothing, so that a plan one of
	// whose tables cannot be copied leaves the target untouched.
	in, err := r.readSources(ctx)
	if err != nil {
		return nil, err
	}
	r.srcDefs = in.defs
	recorded, err := r.steps.Recorded(ctx, r.dst)
	if err != nil {
		return nil, err
	}
	tg := r.target(in.defs, recorded)
	for i, t := range r.plan.Tables {
		if _, err := tg.Prepare(ctx, r.dst, t, in.cols[i], in.defs[i]); err != nil {
			return nil, fmt.Errorf("target table %s: %w", t.Target, err)
		}
	}
	preps, err := r.prepareTargets(ctx, in)
	if err != nil {
		return nil, err
	}
	notMigrated, err := r.notMigrated(ctx, in)
	if err != nil {
		return nil, err
	}
	notes := []string{}
	for i, t := range r.plan.Tables {
		for _, n := range preps[i].Notes {
			notes = append(notes, t.Target+": "+n)
		}
	}
	r.mu.Lock()
	r.report.Notes, r.report.NotMigrated = notes, notMigrated
	r.mu.Unlock()
	var jobs []shardJob
	for i, t := range r.plan.Tables {
		src, dst, read := preps[i].Src, preps[i].Dst, in.cols[i]
		names := make([]string, len(src))
		for i, c := range src {
			names[i] = c.Name
		}
		convert := typemap.Converter(r.srcD.Engine(), r.dstD.Engine(), src, dst)
		rc, ok := r.dstD.(dialect.RawCopier)
		passthrough := ok && convert == nil && r.srcD.Engine() == r.dstD.Engine() && rc.Passthrough(r.srcD, src, dst, t.Key)
		for i := 0; i < t.Shards; i++ {
			jobs = append(jobs, shardJob{table: t, src: src, dst: dst, read: read, spec: batch.Spec{
				Shard:  fence.Shard{Plan: r.plan.Name, Table: t.Target, Index: i},
				Source: t.SourceIdent(), Target: t.TargetIdent(),
				Columns: names, Key: t.Key, FenceColumn: r.plan.FenceColumn,
				BatchSize: r.plan.BatchSize, MaxRetries: r.plan.MaxRetries,
				Convert: convert, Types: dst, Passthrough: passthrough,
			}})
		}
	}
	return jobs, nil
}

// sources are the plan's source tables as setup and the dry run read
// them, in the plan's order: the copied columns, the whole definition,
// the shard bounds.
type sources struct {
	cols    [][]dialect.Column
	defs    []*dialect.TableDef
	bounds  [][]dialect.Range
	objects *schema.Objects // the views, routines and triggers the post-load phase creates
}

// readSources reads every source table of the plan and checks its key.
func (r *Runner) readSources(ctx context.Context) (*sources, error) {
	n := len(r.plan.Tables)
	in := &sources{cols: make([][]dialect.Column, n), defs: make([]*dialect.TableDef, n), bounds: make([][]dialect.Range, n)}
	for i, t := range r.plan.Tables {
		var err error
		if in.cols[i], err = r.sourceColumns(ctx, t); err != nil {
			return nil, err
		}
		if in.defs[i], err = r.srcD.ReadTable(ctx, r.src, t.SourceIdent()); err != nil {
			return nil, fmt.Errorf("source table %s: %w", t.Name, err)
		}
		if err := schema.CheckMax(ctx, r.src, r.srcD, r.dstD.Engine(), t, in.defs[i]); err != nil {
			return nil, err
		}
		if t.AutoShards {
			t.Shards = plans.ShardsAuto // chosen again; setup keeps the count the target has
		}
		if in.bounds[i], err = schema.ShardBounds(ctx, r.src, r.srcD, t, schema.AutoLimit(r.dstD.Engine(), runtime.GOMAXPROCS(0))); err != nil {
			return nil, err
		}
		if t.Shards == plans.ShardsAuto {
			r.plan.Tables[i].Shards, r.plan.Tables[i].AutoShards = len(in.bounds[i]), true
		}
	}
	var err error
	if in.objects, err = r.readObjects(ctx, in.defs); err != nil {
		return nil, err
	}
	return in, nil
}

// sourceColumns returns the copied columns of a source table and checks
// its key (schema.SourceColumns).
func (r *Runner) sourceColumns(ctx context.Context, t plans.Table) ([]dialect.Column, error) {
	return schema.SourceColumns(ctx, r.src, r.srcD, t, r.plan.FenceColumn)
}

// target is the plan's target as setup prepares it: defs are the source
// tables' definitions, in the plan's order; recorded the post-load steps
// the plan has recorded.
func (r *Runner) target(defs []*dialect.TableDef, recorded postload.Steps) schema.Target {
	targets := map[string][]string{}
	for i, t := range r.plan.Tables {
		if defs[i] != nil {
			targets[strings.Join(defs[i].Name, ".")] = t.TargetIdent()
		}
	}
	rec := map[string]map[string]bool{}
	for _, s := range recorded {
		if rec[s.Target] == nil {
			rec[s.Target] = map[string]bool{}
		}
		rec[s.Target][s.Name] = true
	}
	tg := schema.Target{SQL: r.dstD, Source: r.srcD.Engine(), FenceColumn: r.plan.FenceColumn, Targets: targets, Recorded: rec}
	if r.src != nil {
		tg.SourceDB, tg.SourceSQL = r.src, r.srcD
	}
	return tg
}

// setupLockName is the plan's setup lock: setup holds it throughout, the
// post-load phase's claim while it records the phase running.
func (r *Runner) setupLockName() string { return "migrate:" + r.plan.Name }

// helpersLock serialises the creation of the helper tables by every plan
// sharing a PostgreSQL target: two transactions creating one table "IF NOT
// EXISTS" at once fail. (Plan names cannot hold a '/'.)
const helpersLock = "migrate/helpers"

// prepareTargets prepares the target for every table, on one connection
// that holds the setup lock: the target tables' DDL, the helper tables,
// the post-load steps (a created table's indexes and foreign keys, an
// existing table's foreign keys, recorded once and before its foreign keys
// are dropped; the source's views, routines and triggers), the checkpoints with their shard bounds. Where DDL
// is transactional (PostgreSQL) it is one transaction, so a failure
// anywhere leaves the target as it was; where DDL commits itself (MySQL),
// a table created here is dropped again when a later step fails, and the
// checkpoints are one transaction after the DDL. It returns each table's
// preparation, in the plan's order.
func (r *Runner) prepareTargets(ctx context.Context, in *sources) (preps []*schema.Prepared, err error) {
	conn, err := r.dst.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("target setup: %w", err)
	}
	defer conn.Close()
	names := []string{r.setupLockName()}
	if r.dstD.TransactionalDDL() {
		names = append(names, helpersLock)
	}
	for _, name := range names {
		unlock, err := schema.Lock(ctx, conn, r.dstD, name)
		if err != nil {
			return nil, err
		}
		defer func() {
			if uerr := unlock(); uerr != nil && err == nil {
				err = uerr
			}
		}()
	}
	var created [][]string // tables created here where DDL commits itself: dropped again on failure
	defer func() {
		if err != nil && len(created) > 0 {
			r.dropCreated(conn, created)
		}
	}()
	var db dialect.DB = conn
	if r.dstD.TransactionalDDL() {
		tx, berr := conn.BeginTx(ctx, nil)
		if berr != nil {
			return nil, fmt.Errorf("target setup: %w", berr)
		}
		defer func() { _ = tx.Rollback() }() // after Commit: sql.ErrTxDone, nothing done
		db = tx
	}
	recorded, err := r.steps.Recorded(ctx, db)
	if err != nil {
		return nil, err
	}
	preps = make([]*schema.Prepared, len(r.plan.Tables))
	tg := r.target(in.defs, recorded)
	for i, t := range r.plan.Tables {
		if preps[i], err = tg.Prepare(ctx, db, t, in.cols[i], in.defs[i]); err != nil {
			return nil, fmt.Errorf("target table %s: %w", t.Target, err)
		}
	}
	if err := r.runDDL(ctx, db, preps, &created); err != nil {
		return nil, err
	}
	for _, h := range r.dstD.Helpers() {
		if _, err := db.ExecContext(ctx, h); err != nil {
			return nil, schema.StmtError("create helper tables", h, err)
		}
	}
	tables := make([]postload.TableSteps, len(preps))
	for i, t := range r.plan.Tables {
		tables[i] = postload.TableSteps{Target: t.Target, Steps: preps[i].Steps}
	}
	if err := r.steps.Record(ctx, db, tables, in.objects.Steps, recorded); err != nil {
		return nil, err
	}
	if err := r.dropForeignKeys(ctx, db, preps, recorded); err != nil {
		return nil, err
	}
	if !r.dstD.TransactionalDDL() {
		// The DDL above committed itself and is idempotent; the
		// checkpoints and watermark floors are rows, written in one
		// transaction: a setup killed among them leaves none.
		tx, berr := conn.BeginTx(ctx, nil)
		if berr != nil {
			return nil, fmt.Errorf("target setup: %w", berr)
		}
		defer func() { _ = tx.Rollback() }()
		db = tx
	}
	if err := r.writeCheckpoints(ctx, db, preps, in.bounds); err != nil {
		return nil, err
	}
	if err := db.(*sql.Tx).Commit(); err != nil {
		return nil, fmt.Errorf("target setup: commit: %w", err)
	}
	return preps, nil
}

// runDDL runs each table's DDL first, so that a user without the rights
// to run it changes nothing. A table created where DDL commits itself is
// added to created.
func (r *Runner) runDDL(ctx context.Context, db dialect.DB, preps []*schema.Prepared, created *[][]string) error {
	for i, t := range r.plan.Tables {
		p, recordedCreate := preps[i], false
		for _, n := range p.Notes {
			r.log.Warn("not reproduced in the target", "table", t.Target, "what", n)
		}
		for _, q := range p.DDL {
			r.log.Info("preparing the target table", "table", t.Target, "ddl", q)
			if _, err := db.ExecContext(ctx, q); err != nil {
				return schema.StmtError("target table "+t.Target, q, err)
			}
			if p.Created && !r.dstD.TransactionalDDL() && strings.HasPrefix(q, "CREATE TABLE") && !recordedCreate {
				*created, recordedCreate = append(*created, t.TargetIdent()), true
			}
		}
	}
	return nil
}

// dropForeignKeys drops the foreign keys of existing target tables that
// the post-load phase re-creates (recorded by now), not those whose
// re-creation is done: a finished plan run again keeps them. Nor any
// while the phase runs (recorded, under the setup lock that its claim
// takes too): every shard is done then, so there is no load to speed up,
// and its holder may have created a key whose step it has not marked done
// yet — dropped now, it would be lost for good.
func (r *Runner) dropForeignKeys(ctx context.Context, db dialect.DB, preps []*schema.Prepared, recorded postload.Steps) error {
	if recorded.State() == postload.Running {
		if hasDrops(preps) {
			r.log.Info("the post-load phase is running: the target's foreign keys stay in place")
		}
		return nil
	}
	done := map[string]bool{}
	for _, s := range recorded {
		if s.State == postload.Done && s.Kind == dialect.StepForeignKey { // the phase's own row (seq 0) is neither
			done[s.Target+"\x00"+s.Name] = true
		}
	}
	for i, t := range r.plan.Tables {
		p := preps[i]
		for _, name := range slices.Sorted(maps.Keys(p.DropFKs)) {
			if done[t.Target+"\x00"+name] {
				continue
			}
			q := p.DropFKs[name]
			r.log.Info("dropping a foreign key of the target table for the load; the post-load phase re-creates it", "table", t.Target, "foreign_key", name)
			if _, err := db.ExecContext(ctx, q); err != nil {
				return schema.StmtError("target table "+t.Target, q, err)
			}
		}
	}
	return nil
}

// hasDrops says whether any table has foreign keys dropForeignKeys would drop.
func hasDrops(preps []*schema.Prepared) bool {
	for _, p := range preps {
		if len(p.DropFKs) > 0 {
			return true
		}
	}
	return false
}

// writeCheckpoints writes each shard's checkpoint with its bounds, the
// first time; a table that existed before this plan (no DDL, no
// checkpoints) floors the new shards' watermarks above its highest token.
func (r *Runner) writeCheckpoints(ctx context.Context, db dialect.DB, preps []*schema.Prepared, bounds [][]dialect.Range) error {
	for i, t := range r.plan.Tables {
		n, err := r.checkShardCount(ctx, db, i)
		if err != nil {
			return err
		}
		if n > 0 {
			continue // set up before, by this instance or another
		}
		var floor fence.Token
		if !preps[i].Created {
			if floor, err = r.tokenFloor(ctx, db, t); err != nil {
				return err
			}
		}
		for j, b := range bounds[i] {
			s := fence.Shard{Plan: r.plan.Name, Table: t.Target, Index: j}
			if err := r.cursor.Init(ctx, db, s, b.Lo, b.Hi); err != nil {
				return err
			}
			if floor > 0 {
				if err := r.fence.Floor(ctx, db, s, floor); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// dropCreated drops again the target tables a failed setup created (where
// DDL commits itself): they are empty, and no instance can use them before
// setup succeeds.
func (r *Runner) dropCreated(conn *sql.Conn, tables [][]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, t := range tables {
		q := r.dstD.DropTable(t)
		if _, err := conn.ExecContext(ctx, q); err != nil {
			r.log.Warn("could not drop a target table created by the failed setup", "table", strings.Join(t, "."), "statement", q, "err", err)
			continue
		}
		r.log.Info("dropped the target table created by the failed setup", "table", strings.Join(t, "."))
	}
}

// tokenFloor is the highest token in the rows of a target table that
// existed before this plan's first run: the plan's shards start above it
// (fence.Floor), or the rows an earlier plan wrote with a newer token than
// the new plan's first would refuse it. One scan of the table's fence
// column, once per plan and table.
func (r *Runner) tokenFloor(ctx context.Context, db dialect.DB, t plans.Table) (fence.Token, error) {
	var top int64
	q := r.dstD.MaxToken(t.TargetIdent(), r.plan.FenceColumn)
	if err := db.QueryRowContext(ctx, q).Scan(&top); err != nil {
		return 0, schema.StmtError("highest token in target table "+t.Target, q, err)
	}
	if top > 0 {
		r.log.Info("the target table holds rows written by an earlier plan; this plan's tokens start above theirs", "table", t.Target, "highest_token", top)
	}
	return fence.Token(top), nil
}

// checkShardCount refuses a plan whose shard count differs from the one its
// existing checkpoints were made with: the stored key ranges would no longer
// cover the table exactly (fewer shards leave rows out, more overlap). A
// table with `shards: auto` takes the count its checkpoints have. It
// returns how many checkpoints the i-th table has.
func (r *Runner) checkShardCount(ctx context.Context, tx dialect.DB, i int) (int, error) {
	n, err := r.checkpointCounts(ctx, tx)
	if err != nil {
		return 0, err
	}
	t := &r.plan.Tables[i]
	switch c := n[t.Target]; {
	case c != 0 && t.AutoShards:
		t.Shards = c
	case c != 0 && c != t.Shards:
		return 0, fmt.Errorf("%w: table %s has %d checkpoints in the target but the plan says shards: %d; the key ranges are fixed at the first run (use a new plan name to re-shard)", plans.ErrInvalid, t.Name, c, t.Shards)
	}
	return n[t.Target], nil
}

// checkpointCounts counts the plan's checkpoints in the target by target
// table.
func (r *Runner) checkpointCounts(ctx context.Context, q dialect.DB) (map[string]int, error) {
	cps, err := r.cursor.List(ctx, q, r.plan.Name)
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, cp := range cps {
		n[cp.Shard.Table]++
	}
	return n, nil
}
