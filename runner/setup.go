package runner

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/schema"
	"github.com/migrate-dev/migrate/typemap"
)

// shardJob is one shard of one table, with the source's and the target's
// definitions of the copied columns.
type shardJob struct {
	table    plans.Table
	spec     batch.Spec
	src, dst []dialect.Column
}

// setup prepares the target for every table (C4) — helper tables, the
// target table if missing, the fence column, checkpoints with shard bounds —
// under a setup lock, so competing instances agree on the result. It returns
// the shard jobs.
func (r *Runner) setup(ctx context.Context) ([]shardJob, error) {
	// First every table is checked, changing nothing, so that a plan one of
	// whose tables cannot be copied leaves the target untouched.
	cols := make([][]dialect.Column, len(r.plan.Tables))
	bounds := make([][]dialect.Range, len(r.plan.Tables))
	for i, t := range r.plan.Tables {
		var err error
		if cols[i], err = r.sourceColumns(ctx, t); err != nil {
			return nil, err
		}
		if _, _, err := r.target().Table(ctx, r.dst, t, cols[i]); err != nil {
			return nil, fmt.Errorf("target table %s: %w", t.Target, err)
		}
		if bounds[i], err = schema.ShardBounds(ctx, r.src, r.srcD, t); err != nil {
			return nil, err
		}
	}
	dsts, err := r.prepareTargets(ctx, cols, bounds)
	if err != nil {
		return nil, err
	}
	var jobs []shardJob
	for i, t := range r.plan.Tables {
		src, dst := cols[i], dsts[i]
		names := make([]string, len(src))
		for i, c := range src {
			names[i] = c.Name
		}
		convert := typemap.Converter(r.srcD.Engine(), r.dstD.Engine(), src, dst)
		for i := 0; i < t.Shards; i++ {
			jobs = append(jobs, shardJob{table: t, src: src, dst: dst, spec: batch.Spec{
				Shard:  fence.Shard{Plan: r.plan.Name, Table: t.Target, Index: i},
				Source: t.SourceIdent(), Target: t.TargetIdent(),
				Columns: names, Key: t.Key, FenceColumn: r.plan.FenceColumn,
				BatchSize: r.plan.BatchSize, MaxRetries: r.plan.MaxRetries,
				Convert: convert, Types: dst,
			}})
		}
	}
	return jobs, nil
}

// sourceColumns returns the copied columns of a source table and checks
// its key (schema.SourceColumns).
func (r *Runner) sourceColumns(ctx context.Context, t plans.Table) ([]dialect.Column, error) {
	return schema.SourceColumns(ctx, r.src, r.srcD, t, r.plan.FenceColumn)
}

// target is the plan's target as setup prepares it.
func (r *Runner) target() schema.Target {
	return schema.Target{SQL: r.dstD, Source: r.srcD.Engine(), FenceColumn: r.plan.FenceColumn}
}

// helpersLock serialises the creation of the helper tables by every plan
// sharing a PostgreSQL target: two transactions creating one table "IF NOT
// EXISTS" at once fail. (Plan names cannot hold a '/'.)
const helpersLock = "migrate/helpers"

// prepareTargets prepares the target for every table, on one connection
// that holds the setup lock: the target tables' DDL (first, so that a user
// without the rights to run it changes nothing), the helper tables, the
// checkpoints with their shard bounds. Where DDL is transactional
// (PostgreSQL) it is one transaction, so a failure anywhere leaves the
// target as it was; where DDL commits itself (MySQL), a table created here
// is dropped again when a later step fails, and the checkpoints are one
// transaction after the DDL. It returns each table's target definitions of
// the copied columns, in the order of cols.
func (r *Runner) prepareTargets(ctx context.Context, cols [][]dialect.Column, bounds [][]dialect.Range) (dst [][]dialect.Column, err error) {
	conn, err := r.dst.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("target setup: %w", err)
	}
	defer conn.Close()
	names := []string{"migrate:" + r.plan.Name}
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
	var db schema.Conn = conn
	if r.dstD.TransactionalDDL() {
		tx, berr := conn.BeginTx(ctx, nil)
		if berr != nil {
			return nil, fmt.Errorf("target setup: %w", berr)
		}
		defer func() { _ = tx.Rollback() }() // after Commit: sql.ErrTxDone, nothing done
		db = tx
	}
	dst, ddl, err := r.runDDL(ctx, db, cols, &created)
	if err != nil {
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
	if err := r.writeCheckpoints(ctx, db, ddl, bounds); err != nil {
		return nil, err
	}
	if err := db.(*sql.Tx).Commit(); err != nil {
		return nil, fmt.Errorf("target setup: commit: %w", err)
	}
	return dst, nil
}

// runDDL checks every table again, under the setup lock, before anything
// changes; then runs each table's DDL and creates the helper tables. A
// table created where DDL commits itself is added to created.
func (r *Runner) runDDL(ctx context.Context, db schema.Conn, cols [][]dialect.Column, created *[][]string) (dst [][]dialect.Column, ddl []string, err error) {
	dst = make([][]dialect.Column, len(r.plan.Tables))
	ddl = make([]string, len(r.plan.Tables))
	for i, t := range r.plan.Tables {
		if dst[i], ddl[i], err = r.target().Table(ctx, db, t, cols[i]); err != nil {
			return nil, nil, fmt.Errorf("target table %s: %w", t.Target, err)
		}
	}
	for i, t := range r.plan.Tables {
		if ddl[i] == "" {
			continue
		}
		r.log.Info("preparing the target table", "table", t.Target, "ddl", ddl[i])
		if _, err := db.ExecContext(ctx, ddl[i]); err != nil {
			return nil, nil, schema.StmtError("target table "+t.Target, ddl[i], err)
		}
		if !r.dstD.TransactionalDDL() && strings.HasPrefix(ddl[i], "CREATE TABLE") {
			*created = append(*created, t.TargetIdent())
		}
	}
	for _, h := range r.dstD.Helpers() {
		if _, err := db.ExecContext(ctx, h); err != nil {
			return nil, nil, schema.StmtError("create helper tables", h, err)
		}
	}
	return dst, ddl, nil
}

// writeCheckpoints writes each shard's checkpoint with its bounds, the
// first time; a table that existed before this plan (no DDL, no
// checkpoints) floors the new shards' watermarks above its highest token.
func (r *Runner) writeCheckpoints(ctx context.Context, db schema.Conn, ddl []string, bounds [][]dialect.Range) error {
	for i, t := range r.plan.Tables {
		n, err := r.checkShardCount(ctx, db, t)
		if err != nil {
			return err
		}
		var floor fence.Token
		if n == 0 && ddl[i] == "" {
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
func (r *Runner) tokenFloor(ctx context.Context, db schema.Conn, t plans.Table) (fence.Token, error) {
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
// cover the table exactly (fewer shards leave rows out, more overlap). It
// returns how many checkpoints the table has.
func (r *Runner) checkShardCount(ctx context.Context, tx schema.Conn, t plans.Table) (int, error) {
	cps, err := r.cursor.List(ctx, tx, r.plan.Name)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, cp := range cps {
		if cp.Shard.Table == t.Target {
			n++
		}
	}
	if n != 0 && n != t.Shards {
		return 0, fmt.Errorf("%w: table %s has %d checkpoints in the target but the plan says shards: %d; the key ranges are fixed at the first run (use a new plan name to re-shard)", plans.ErrInvalid, t.Name, n, t.Shards)
	}
	return n, nil
}
