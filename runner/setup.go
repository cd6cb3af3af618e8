package runner

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
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

// planSetup is the setup of a plan's target (run) and the reading of its
// sources, which the dry run shares. It works with the dialects as given,
// before a run tells them the copied columns' types.
type planSetup struct {
	plan       *plans.Plan // run and readSources set `shards: auto` tables' counts in it
	src, dst   *sql.DB
	srcD, dstD dialect.Dialect
	log        *slog.Logger
	fence      *fence.Fence
	cursor     *cursor.Store
	steps      postload.Store

	// What run found, for the run's report and its post-load phase: the
	// source tables' definitions in the plan's order, what of the source
	// the target does not reproduce, the source's objects not copied.
	defs             []*dialect.TableDef
	notes, notCopied []string
}

// newSetup is the setup of r's plan.
func (r *Runner) newSetup() *planSetup {
	return &planSetup{plan: r.plan, src: r.src, dst: r.dst, srcD: r.srcD, dstD: r.dstD, log: r.log,
		fence: r.fence, cursor: r.cursor, steps: r.steps}
}

// run prepares the target for every table (C4) — helper tables, the
// target table if missing, the fence column, the post-load steps,
// checkpoints with shard bounds — under a setup lock, so competing
// instances agree on the result. It returns the shard jobs.
func (ps *planSetup) run(ctx context.Context) ([]shardJob, error) {
	// First every table is checked, changing nothing, so that a plan one of
	// whose tables cannot be copied leaves the target untouched.
	in, err := ps.readSources(ctx)
	if err != nil {
		return nil, err
	}
	ps.defs = in.defs
	recorded, err := ps.steps.Recorded(ctx, ps.dst)
	if err != nil {
		return nil, err
	}
	tg := ps.target(in.defs, recorded)
	for i, t := range ps.plan.Tables {
		if _, err := tg.Prepare(ctx, ps.dst, t, in.cols[i], in.defs[i]); err != nil {
			return nil, fmt.Errorf("target table %s: %w", t.Target, err)
		}
	}
	preps, err := ps.prepareTargets(ctx, in)
	if err != nil {
		return nil, err
	}
	notMigrated, err := ps.notMigrated(ctx, in)
	if err != nil {
		return nil, err
	}
	notes := []string{}
	for i, t := range ps.plan.Tables {
		for _, n := range preps[i].Notes {
			notes = append(notes, t.Target+": "+n)
		}
	}
	ps.notes, ps.notCopied = notes, notMigrated
	var jobs []shardJob
	for i, t := range ps.plan.Tables {
		src, dst, read := preps[i].Src, preps[i].Dst, in.cols[i]
		names := make([]string, len(src))
		for i, c := range src {
			names[i] = c.Name
		}
		convert := typemap.Converter(ps.srcD.Engine(), ps.dstD.Engine(), src, dst)
		rc, ok := ps.dstD.(dialect.RawCopier)
		passthrough := ok && convert == nil && ps.srcD.Engine() == ps.dstD.Engine() && rc.Passthrough(ps.srcD, src, dst, t.Key)
		for i := 0; i < t.Shards; i++ {
			jobs = append(jobs, shardJob{table: t, src: src, dst: dst, read: read, spec: batch.Spec{
				Shard:  fence.Shard{Plan: ps.plan.Name, Table: t.Target, Index: i},
				Source: t.SourceIdent(), Target: t.TargetIdent(),
				Columns: names, Key: t.Key, FenceColumn: ps.plan.FenceColumn,
				BatchSize: ps.plan.BatchSize, MaxRetries: ps.plan.MaxRetries,
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

// readSources reads every source table of the plan and checks its key
// (schema.SourceColumns).
func (ps *planSetup) readSources(ctx context.Context) (*sources, error) {
	n := len(ps.plan.Tables)
	in := &sources{cols: make([][]dialect.Column, n), defs: make([]*dialect.TableDef, n), bounds: make([][]dialect.Range, n)}
	for i, t := range ps.plan.Tables {
		var err error
		if in.cols[i], err = schema.SourceColumns(ctx, ps.src, ps.srcD, t, ps.plan.FenceColumn); err != nil {
			return nil, err
		}
		if in.defs[i], err = ps.srcD.ReadTable(ctx, ps.src, t.SourceIdent()); err != nil {
			return nil, fmt.Errorf("source table %s: %w", t.Name, err)
		}
		if err := schema.CheckMax(ctx, ps.src, ps.srcD, ps.dstD.Engine(), t, in.defs[i]); err != nil {
			return nil, err
		}
		if t.AutoShards {
			t.Shards = plans.ShardsAuto // chosen again; setup keeps the count the target has
		}
		if in.bounds[i], err = schema.ShardBounds(ctx, ps.src, ps.srcD, t, schema.AutoLimit(ps.dstD.Engine(), runtime.GOMAXPROCS(0))); err != nil {
			return nil, err
		}
		if t.Shards == plans.ShardsAuto {
			ps.plan.Tables[i].Shards, ps.plan.Tables[i].AutoShards = len(in.bounds[i]), true
		}
	}
	var err error
	if in.objects, err = ps.readObjects(ctx, in.defs); err != nil {
		return nil, err
	}
	return in, nil
}

// target is the plan's target as setup prepares it: defs are the source
// tables' definitions, in the plan's order; recorded the post-load steps
// the plan has recorded.
func (ps *planSetup) target(defs []*dialect.TableDef, recorded postload.Steps) schema.Target {
	targets := map[string][]string{}
	for i, t := range ps.plan.Tables {
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
	tg := schema.Target{SQL: ps.dstD, Source: ps.srcD.Engine(), FenceColumn: ps.plan.FenceColumn, Targets: targets, Recorded: rec}
	if ps.src != nil {
		tg.SourceDB, tg.SourceSQL = ps.src, ps.srcD
	}
	return tg
}

// setupLockName is a plan's setup lock: setup holds it throughout, the
// post-load phase's claim while it records the phase running.
func setupLockName(plan string) string { return "migrate:" + plan }

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
func (ps *planSetup) prepareTargets(ctx context.Context, in *sources) (preps []*schema.Prepared, err error) {
	conn, err := ps.dst.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("target setup: %w", err)
	}
	defer conn.Close()
	names := []string{setupLockName(ps.plan.Name)}
	if ps.dstD.TransactionalDDL() {
		names = append(names, helpersLock)
	}
	for _, name := range names {
		unlock, err := schema.Lock(ctx, conn, ps.dstD, name)
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
			ps.dropCreated(ctx, conn, created)
		}
	}()
	var db dialect.DB = conn
	if ps.dstD.TransactionalDDL() {
		tx, berr := conn.BeginTx(ctx, nil)
		if berr != nil {
			return nil, fmt.Errorf("target setup: %w", berr)
		}
		defer func() { _ = tx.Rollback() }() // after Commit: sql.ErrTxDone, nothing done
		db = tx
	}
	recorded, err := ps.steps.Recorded(ctx, db)
	if err != nil {
		return nil, err
	}
	preps = make([]*schema.Prepared, len(ps.plan.Tables))
	tg := ps.target(in.defs, recorded)
	for i, t := range ps.plan.Tables {
		if preps[i], err = tg.Prepare(ctx, db, t, in.cols[i], in.defs[i]); err != nil {
			return nil, fmt.Errorf("target table %s: %w", t.Target, err)
		}
	}
	if err := ps.runDDL(ctx, db, preps, &created); err != nil {
		return nil, err
	}
	for _, h := range ps.dstD.Helpers() {
		if _, err := db.ExecContext(ctx, h); err != nil {
			return nil, schema.StmtError("create helper tables", h, err)
		}
	}
	tables := make([]postload.TableSteps, len(preps))
	for i, t := range ps.plan.Tables {
		tables[i] = postload.TableSteps{Target: t.Target, Steps: preps[i].Steps}
	}
	if err := ps.steps.Record(ctx, db, tables, in.objects.Steps, recorded); err != nil {
		return nil, err
	}
	if err := ps.dropForeignKeys(ctx, db, preps, recorded); err != nil {
		return nil, err
	}
	if !ps.dstD.TransactionalDDL() {
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
	if err := ps.writeCheckpoints(ctx, db, preps, in.bounds); err != nil {
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
func (ps *planSetup) runDDL(ctx context.Context, db dialect.DB, preps []*schema.Prepared, created *[][]string) error {
	for i, t := range ps.plan.Tables {
		p, recordedCreate := preps[i], false
		for _, n := range p.Notes {
			ps.log.Warn("not reproduced in the target", "table", t.Target, "what", n)
		}
		for _, q := range p.DDL {
			ps.log.Info("preparing the target table", "table", t.Target, "ddl", q)
			if _, err := db.ExecContext(ctx, q); err != nil {
				return schema.StmtError("target table "+t.Target, q, err)
			}
			if p.Created && !ps.dstD.TransactionalDDL() && strings.HasPrefix(q, "CREATE TABLE") && !recordedCreate {
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
func (ps *planSetup) dropForeignKeys(ctx context.Context, db dialect.DB, preps []*schema.Prepared, recorded postload.Steps) error {
	if recorded.State() == postload.Running {
		if hasDrops(preps) {
			ps.log.Info("the post-load phase is running: the target's foreign keys stay in place")
		}
		return nil
	}
	done := map[string]bool{}
	for _, s := range recorded {
		if s.State == postload.Done && s.Kind == dialect.StepForeignKey { // the phase's own row (seq 0) is neither
			done[s.Target+"\x00"+s.Name] = true
		}
	}
	for i, t := range ps.plan.Tables {
		p := preps[i]
		for _, name := range slices.Sorted(maps.Keys(p.DropFKs)) {
			if done[t.Target+"\x00"+name] {
				continue
			}
			q := p.DropFKs[name]
			ps.log.Info("dropping a foreign key of the target table for the load; the post-load phase re-creates it", "table", t.Target, "foreign_key", name)
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
func (ps *planSetup) writeCheckpoints(ctx context.Context, db dialect.DB, preps []*schema.Prepared, bounds [][]dialect.Range) error {
	for i, t := range ps.plan.Tables {
		n, err := ps.checkShardCount(ctx, db, i)
		if err != nil {
			return err
		}
		if n > 0 {
			continue // set up before, by this instance or another
		}
		var floor fence.Token
		if !preps[i].Created {
			if floor, err = ps.tokenFloor(ctx, db, t); err != nil {
				return err
			}
		}
		for j, b := range bounds[i] {
			s := fence.Shard{Plan: ps.plan.Name, Table: t.Target, Index: j}
			if err := ps.cursor.Init(ctx, db, s, b.Lo, b.Hi); err != nil {
				return err
			}
			if floor > 0 {
				if err := ps.fence.Floor(ctx, db, s, floor); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// dropCreated drops again the target tables a failed setup created (where
// DDL commits itself): they are empty, and no instance can use them before
// setup succeeds. Even when ctx was cancelled (a signal ended the setup).
func (ps *planSetup) dropCreated(ctx context.Context, conn *sql.Conn, tables [][]string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, t := range tables {
		q := ps.dstD.DropTable(t)
		if _, err := conn.ExecContext(ctx, q); err != nil {
			ps.log.Warn("could not drop a target table created by the failed setup", "table", strings.Join(t, "."), "statement", q, "err", err)
			continue
		}
		ps.log.Info("dropped the target table created by the failed setup", "table", strings.Join(t, "."))
	}
}

// tokenFloor is the highest token in the rows of a target table that
// existed before this plan's first run: the plan's shards start above it
// (fence.Floor), or the rows an earlier plan wrote with a newer token than
// the new plan's first would refuse it. One scan of the table's fence
// column, once per plan and table.
func (ps *planSetup) tokenFloor(ctx context.Context, db dialect.DB, t plans.Table) (fence.Token, error) {
	var top int64
	q := ps.dstD.MaxToken(t.TargetIdent(), ps.plan.FenceColumn)
	if err := db.QueryRowContext(ctx, q).Scan(&top); err != nil {
		return 0, schema.StmtError("highest token in target table "+t.Target, q, err)
	}
	if top > 0 {
		ps.log.Info("the target table holds rows written by an earlier plan; this plan's tokens start above theirs", "table", t.Target, "highest_token", top)
	}
	return fence.Token(top), nil
}

// checkShardCount refuses a plan whose shard count differs from the one its
// existing checkpoints were made with: the stored key ranges would no longer
// cover the table exactly (fewer shards leave rows out, more overlap). A
// table with `shards: auto` takes the count its checkpoints have. It
// returns how many checkpoints the i-th table has.
func (ps *planSetup) checkShardCount(ctx context.Context, tx dialect.DB, i int) (int, error) {
	n, err := ps.checkpointCounts(ctx, tx)
	if err != nil {
		return 0, err
	}
	t := &ps.plan.Tables[i]
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
func (ps *planSetup) checkpointCounts(ctx context.Context, q dialect.DB) (map[string]int, error) {
	cps, err := ps.cursor.List(ctx, q, ps.plan.Name)
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, cp := range cps {
		n[cp.Shard.Table]++
	}
	return n, nil
}
