package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/plans"
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
	type prepared struct {
		cols   []dialect.Column
		bounds []dialect.Range
	}
	// First every table is checked, changing nothing, so that a plan one of
	// whose tables cannot be copied leaves the target untouched.
	prep := make([]prepared, len(r.plan.Tables))
	for i, t := range r.plan.Tables {
		cols, err := r.sourceColumns(ctx, t)
		if err != nil {
			return nil, err
		}
		if _, _, err := r.targetTable(ctx, r.dst, t, cols); err != nil {
			return nil, fmt.Errorf("target table %s: %w", t.Target, err)
		}
		bounds, err := r.shardBounds(ctx, t)
		if err != nil {
			return nil, err
		}
		prep[i] = prepared{cols, bounds}
	}
	cols := make([][]dialect.Column, len(prep))
	bounds := make([][]dialect.Range, len(prep))
	for i, p := range prep {
		cols[i], bounds[i] = p.cols, p.bounds
	}
	dsts, err := r.prepareTargets(ctx, cols, bounds)
	if err != nil {
		return nil, err
	}
	var jobs []shardJob
	for i, t := range r.plan.Tables {
		cols, dst := prep[i].cols, dsts[i]
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = c.Name
		}
		convert := typemap.Converter(r.srcD.Engine(), r.dstD.Engine(), cols, dst)
		for i := 0; i < t.Shards; i++ {
			jobs = append(jobs, shardJob{table: t, src: cols, dst: dst, spec: batch.Spec{
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

// sourceColumns returns the copied columns of a source table, in the plan's
// order or the table's, and checks the key columns exist.
func (r *Runner) sourceColumns(ctx context.Context, t plans.Table) ([]dialect.Column, error) {
	all, err := columns(ctx, r.src, r.srcD, t.SourceIdent())
	if errors.Is(err, errNoTable) {
		return nil, fmt.Errorf("%w: source table %s does not exist (or the source user cannot see it)", plans.ErrInvalid, t.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("source table %s: %w", t.Name, err)
	}
	byName := map[string]dialect.Column{}
	for _, c := range all {
		byName[c.Name] = c
	}
	var out []dialect.Column
	if t.Columns == nil {
		for _, c := range all {
			if c.Name != r.plan.FenceColumn {
				out = append(out, c)
			}
		}
	} else {
		for _, n := range t.Columns {
			c, ok := byName[n]
			if !ok {
				return nil, fmt.Errorf("%w: source table %s has no column %q (listed in the plan's columns)", plans.ErrInvalid, t.Name, n)
			}
			out = append(out, c)
		}
	}
	for _, k := range t.Key {
		c, ok := byName[k]
		if !ok {
			return nil, fmt.Errorf("%w: source table %s has no key column %q", plans.ErrInvalid, t.Name, k)
		}
		// A NULL key part makes the keyset comparison NULL: such rows would
		// be skipped silently.
		if !c.NotNull {
			return nil, fmt.Errorf("%w: key column %s.%s may be NULL; the business key must be NOT NULL", plans.ErrInvalid, t.Name, k)
		}
		// MySQL sorts ENUM and SET by their index but compares them as
		// text: a keyset over them skips rows.
		if r.srcD.Engine() == plans.MySQL && (c.Base == "enum" || c.Base == "set") {
			return nil, fmt.Errorf("%w: key column %s.%s is a MySQL %s, whose sort order differs from its comparison; it cannot be a keyset key", plans.ErrInvalid, t.Name, k, c.Base)
		}
	}
	// Equal keys split across two pages would be skipped after the first.
	uniq, err := uniqueIndexes(ctx, r.src, r.srcD, t.SourceIdent())
	if err != nil {
		return nil, fmt.Errorf("source table %s: %w", t.Name, err)
	}
	if !slices.ContainsFunc(uniq, func(cols []string) bool { return subset(cols, t.Key) }) {
		return nil, fmt.Errorf("%w: source table %s has no unique index or primary key within the key %v; the business key must be unique", plans.ErrInvalid, t.Name, t.Key)
	}
	return out, nil
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// errNoTable means a table does not exist.
var errNoTable = errors.New("table does not exist")

// querier is a pool, a connection or a transaction.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// dbConn is a querier that also executes statements.
type dbConn interface {
	querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// columns lists a table's columns, or errNoTable.
func columns(ctx context.Context, db querier, d dialect.Dialect, table []string) ([]dialect.Column, error) {
	q, args := d.TableExists(table)
	var exists bool
	if err := db.QueryRowContext(ctx, q, args...).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, errNoTable
	}
	q, args = d.Columns(table)
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dialect.Column
	for rows.Next() {
		var c dialect.Column
		if err := rows.Scan(&c.Name, &c.Type, &c.Base, &c.NotNull); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// shardBounds splits the table into shards of about the same number of
// rows, at quantiles of the first key column: shard i holds lo_i < k1 <=
// hi_i, the first and last open. More than one shard needs an integer
// first key column. The bounds are stored in the target by the first run
// and read back by every later one.
func (r *Runner) shardBounds(ctx context.Context, t plans.Table) ([]dialect.Range, error) {
	if t.Shards <= 1 {
		return []dialect.Range{{}}, nil
	}
	var lo, hi sql.NullString
	if err := r.src.QueryRowContext(ctx, r.srcD.KeyBounds(t.SourceIdent(), t.Key[0])).Scan(&lo, &hi); err != nil {
		return nil, fmt.Errorf("shard bounds of %s: %w", t.Name, err)
	}
	out := make([]dialect.Range, t.Shards)
	if !lo.Valid {
		return out, nil // empty table: every shard open; the first copies nothing new
	}
	if _, err := strconv.ParseInt(lo.String, 10, 64); err != nil {
		return nil, fmt.Errorf("table %s: shards > 1 need an integer first key column; %q is not", t.Name, t.Key[0])
	}
	// Quantiles of the first key column, so that skewed keys split into
	// shards of about the same number of rows: shard i ends at the key of
	// row (i+1)·count/N in key order.
	var count int64
	if err := r.src.QueryRowContext(ctx, r.srcD.CountRows(t.SourceIdent())).Scan(&count); err != nil {
		return nil, fmt.Errorf("shard bounds of %s: %w", t.Name, err)
	}
	for i := range out {
		if i > 0 {
			out[i].Lo = out[i-1].Hi
		}
		if i == t.Shards-1 {
			break
		}
		var at int64
		pos := count * int64(i+1) / int64(t.Shards)
		if err := r.src.QueryRowContext(ctx, r.srcD.KeyAt(t.SourceIdent(), t.Key[0]), max(pos-1, 0)).Scan(&at); err != nil {
			return nil, fmt.Errorf("shard bounds of %s: key at row %d: %w", t.Name, pos, err)
		}
		out[i].Hi = at
	}
	return out, nil
}

// helpersLock serialises the creation of the helper tables by every plan
// sharing a PostgreSQL target: two transactions creating one table "IF NOT
// EXISTS" at once fail. (Plan names cannot hold a '/'.)
const helpersLock = "migrate/helpers"

// prepareTargets prepares the target for every table, on one connection
// that holds the setup lock: the target tables' DDL (first, so that a user
// without the rights to run it changes nothing), the helper tables, the
// checkpoints with their shard bounds. In PostgreSQL it is one transaction,
// so a failure anywhere leaves the target as it was; in MySQL, where DDL
// commits itself, a table created here is dropped again when a later step
// fails, and the checkpoints are one transaction after the DDL. It returns each table's target definitions of the copied columns,
// in the order of cols.
func (r *Runner) prepareTargets(ctx context.Context, cols [][]dialect.Column, bounds [][]dialect.Range) (dst [][]dialect.Column, err error) {
	conn, err := r.dst.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("target setup: %w", err)
	}
	defer conn.Close()
	unlock, err := r.setupLock(ctx, conn, "migrate:"+r.plan.Name)
	if err != nil {
		return nil, err
	}
	defer func() {
		if uerr := unlock(); uerr != nil && err == nil {
			err = uerr
		}
	}()
	var db dbConn = conn
	transactional := r.dstD.Engine() == plans.Postgres
	if transactional {
		unlockHelpers, lerr := r.setupLock(ctx, conn, helpersLock)
		if lerr != nil {
			return nil, lerr
		}
		defer func() {
			if uerr := unlockHelpers(); uerr != nil && err == nil {
				err = uerr
			}
		}()
		tx, berr := conn.BeginTx(ctx, nil)
		if berr != nil {
			return nil, fmt.Errorf("target setup: %w", berr)
		}
		defer func() { _ = tx.Rollback() }() // after Commit: sql.ErrTxDone, nothing done
		db = tx
	}
	var created [][]string // tables created here (MySQL): dropped again on failure
	defer func() {
		if err != nil && len(created) > 0 {
			r.dropCreated(conn, created)
		}
	}()
	// Everything that can refuse the plan is checked again, under the
	// lock, before anything changes.
	dst = make([][]dialect.Column, len(r.plan.Tables))
	ddl := make([]string, len(r.plan.Tables))
	for i, t := range r.plan.Tables {
		if dst[i], ddl[i], err = r.targetTable(ctx, db, t, cols[i]); err != nil {
			return nil, fmt.Errorf("target table %s: %w", t.Target, err)
		}
	}
	for i, t := range r.plan.Tables {
		if ddl[i] == "" {
			continue
		}
		r.log.Info("preparing the target table", "table", t.Target, "ddl", ddl[i])
		if _, err := db.ExecContext(ctx, ddl[i]); err != nil {
			return nil, stmtError("target table "+t.Target, ddl[i], err)
		}
		if !transactional && strings.HasPrefix(ddl[i], "CREATE TABLE") {
			created = append(created, t.TargetIdent())
		}
	}
	for _, h := range r.dstD.Helpers() {
		if _, err := db.ExecContext(ctx, h); err != nil {
			return nil, stmtError("create helper tables", h, err)
		}
	}
	if !transactional {
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
	for i, t := range r.plan.Tables {
		n, err := r.checkShardCount(ctx, db, t)
		if err != nil {
			return nil, err
		}
		var floor fence.Token
		if n == 0 && ddl[i] == "" {
			if floor, err = r.tokenFloor(ctx, db, t); err != nil {
				return nil, err
			}
		}
		for j, b := range bounds[i] {
			s := fence.Shard{Plan: r.plan.Name, Table: t.Target, Index: j}
			if err := r.cursor.Init(ctx, db, s, b.Lo, b.Hi); err != nil {
				return nil, err
			}
			if floor > 0 {
				if err := r.fence.Floor(ctx, db, s, floor); err != nil {
					return nil, err
				}
			}
		}
	}
	if tx, ok := db.(*sql.Tx); ok {
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("target setup: commit: %w", err)
		}
	}
	return dst, nil
}

// setupLockWait is how long setup waits for another instance's setup.
const setupLockWait = 5 * time.Minute

// setupLock takes a setup lock on conn and returns its release.
func (r *Runner) setupLock(ctx context.Context, conn *sql.Conn, name string) (func() error, error) {
	// Tried until granted, for up to setupLockWait: a wait in one
	// statement would be ended by the session's statement timeout (half
	// the lease TTL) while another instance's setup runs.
	q, args := r.dstD.SetupLock(name)
	for start := time.Now(); ; {
		var held sql.NullInt64
		if err := conn.QueryRowContext(ctx, q, args...).Scan(&held); err != nil {
			return nil, fmt.Errorf("target setup lock %q: %w", name, err)
		}
		if held.Int64 == 1 {
			break
		}
		if time.Since(start) > setupLockWait {
			return nil, fmt.Errorf("target setup lock %q: not granted (another instance has held it for %v)", name, setupLockWait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return func() error {
		q, args := r.dstD.SetupUnlock(name)
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), q, args...); err != nil {
			return fmt.Errorf("target setup unlock %q: %w", name, err)
		}
		return nil
	}, nil
}

// dropCreated drops again the target tables a failed setup created (MySQL,
// whose DDL is not transactional): they are empty, and no instance can use
// them before setup succeeds.
func (r *Runner) dropCreated(conn *sql.Conn, tables [][]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, t := range tables {
		q := r.dstD.DrillDropTable(t)
		if _, err := conn.ExecContext(ctx, q); err != nil {
			r.log.Warn("could not drop a target table created by the failed setup", "table", strings.Join(t, "."), "statement", q, "err", err)
			continue
		}
		r.log.Info("dropped the target table created by the failed setup", "table", strings.Join(t, "."))
	}
}

// stmtError names the statement that failed: the DDL holds identifiers and
// types only, never a value.
func stmtError(what, stmt string, err error) error {
	return fmt.Errorf("%s: %w; the statement was:\n%s", what, err, stmt)
}

// tokenFloor is the highest token in the rows of a target table that
// existed before this plan's first run: the plan's shards start above it
// (fence.Floor), or the rows an earlier plan wrote with a newer token than
// the new plan's first would refuse it. One scan of the table's fence
// column, once per plan and table.
func (r *Runner) tokenFloor(ctx context.Context, db dbConn, t plans.Table) (fence.Token, error) {
	var top int64
	q := r.dstD.MaxToken(t.TargetIdent(), r.plan.FenceColumn)
	if err := db.QueryRowContext(ctx, q).Scan(&top); err != nil {
		return 0, stmtError("highest token in target table "+t.Target, q, err)
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
func (r *Runner) checkShardCount(ctx context.Context, tx dbConn, t plans.Table) (int, error) {
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

// targetTable decides what the target table needs, changing nothing: when
// missing, a CREATE TABLE with the source's columns mapped to the target
// engine's types (C4); when present, every copied column and a unique index
// on the key, plus an ALTER TABLE adding the fence column if it lacks it
// (only then: it would queue behind a running holder's batches). It returns
// the target's definitions of the copied columns and the DDL to run, if any.
func (r *Runner) targetTable(ctx context.Context, conn dbConn, t plans.Table, cols []dialect.Column) ([]dialect.Column, string, error) {
	ident := t.TargetIdent()
	existing, err := columns(ctx, conn, r.dstD, ident)
	if errors.Is(err, errNoTable) {
		mapped, err := typemap.MapColumns(r.srcD.Engine(), r.dstD.Engine(), t.Name, cols, t.Key, t.Types)
		if err != nil {
			return nil, "", err
		}
		return mapped, r.dstD.CreateTable(ident, mapped, t.Key, r.plan.FenceColumn), nil
	}
	if err != nil {
		return nil, "", err
	}
	dst, err := align(existing, cols)
	if err != nil {
		return nil, "", err
	}
	if err := r.checkUniqueKey(ctx, conn, t); err != nil {
		return nil, "", err
	}
	if !slices.ContainsFunc(existing, func(c dialect.Column) bool { return c.Name == r.plan.FenceColumn }) {
		return dst, r.dstD.AddFenceColumn(ident, r.plan.FenceColumn), nil
	}
	return dst, "", nil
}

// align returns the columns of a table (all) matching cols by name, in the
// order of cols.
func align(all, cols []dialect.Column) ([]dialect.Column, error) {
	byName := map[string]dialect.Column{}
	for _, c := range all {
		byName[c.Name] = c
	}
	out := make([]dialect.Column, len(cols))
	for i, c := range cols {
		d, ok := byName[c.Name]
		if !ok {
			return nil, fmt.Errorf("%w: the target table has no column %q", plans.ErrInvalid, c.Name)
		}
		out[i] = d
	}
	return out, nil
}

// checkUniqueKey makes sure an existing target table has a unique index on
// exactly the business key, which the idempotent upsert needs.
func (r *Runner) checkUniqueKey(ctx context.Context, tx dbConn, t plans.Table) error {
	uniq, err := uniqueIndexes(ctx, tx, r.dstD, t.TargetIdent())
	if err != nil {
		return fmt.Errorf("unique keys of %s: %w", t.Target, err)
	}
	want := slices.Sorted(slices.Values(t.Key))
	found := false
	for _, cols := range uniq {
		if slices.Equal(slices.Sorted(slices.Values(cols)), want) {
			found = true
		} else if r.dstD.Engine() == plans.MySQL {
			// ON DUPLICATE KEY UPDATE fires on any unique index: a row
			// could land on another row that shares only that index.
			return fmt.Errorf("%w: target table %s has a unique index on %v besides the key %v; MySQL's upsert would update whichever row it matches", plans.ErrInvalid, t.Target, cols, t.Key)
		}
	}
	if !found {
		return fmt.Errorf("%w: target table %s has no unique index on exactly the key %v; the idempotent upsert needs one", plans.ErrInvalid, t.Target, t.Key)
	}
	return nil
}

// uniqueIndexes returns the column lists of a table's unique indexes.
func uniqueIndexes(ctx context.Context, db querier, d dialect.Dialect, table []string) ([][]string, error) {
	q, args := d.UniqueKeys(table)
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	idx := map[string][]string{}
	var order []string
	for rows.Next() {
		var name, col string
		if err := rows.Scan(&name, &col); err != nil {
			return nil, err
		}
		if _, ok := idx[name]; !ok {
			order = append(order, name)
		}
		idx[name] = append(idx[name], col)
	}
	out := make([][]string, len(order))
	for i, n := range order {
		out[i] = idx[n]
	}
	return out, rows.Err()
}
