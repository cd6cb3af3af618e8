package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/plans"
)

// shardJob is one shard of one table.
type shardJob struct {
	table plans.Table
	spec  batch.Spec
}

// setup prepares the target for every table (C4) — helper tables, the
// target table if missing, the fence column, checkpoints with shard bounds —
// in one transaction per table under a setup lock, so competing instances
// agree on the result. It returns the shard jobs.
func (r *Runner) setup(ctx context.Context) ([]shardJob, error) {
	var jobs []shardJob
	for _, t := range r.plan.Tables {
		cols, err := r.sourceColumns(ctx, t)
		if err != nil {
			return nil, err
		}
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = c.Name
		}
		bounds, err := r.shardBounds(ctx, t)
		if err != nil {
			return nil, err
		}
		if err := r.prepareTarget(ctx, t, cols, bounds); err != nil {
			return nil, err
		}
		for i := 0; i < t.Shards; i++ {
			jobs = append(jobs, shardJob{table: t, spec: batch.Spec{
				Shard:  fence.Shard{Plan: r.plan.Name, Table: t.Target, Index: i},
				Source: t.SourceIdent(), Target: t.TargetIdent(),
				Columns: names, Key: t.Key, FenceColumn: r.plan.FenceColumn,
				BatchSize: r.plan.BatchSize, MaxRetries: r.plan.MaxRetries,
			}})
		}
	}
	return jobs, nil
}

// sourceColumns returns the copied columns of a source table, in the plan's
// order or the table's, and checks the key columns exist.
func (r *Runner) sourceColumns(ctx context.Context, t plans.Table) ([]dialect.Column, error) {
	all, err := columns(ctx, r.src, r.srcD, t.SourceIdent())
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
				return nil, fmt.Errorf("source table %s has no column %q", t.Name, n)
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

// querier is a pool or a transaction.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
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
		if err := rows.Scan(&c.Name, &c.Type, &c.NotNull); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// shardBounds splits the first key column's [min, max] evenly into the
// table's shards: shard i holds lo_i < k1 <= hi_i, the first and last open.
// More than one shard needs an integer first key column.
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
	a, err1 := strconv.ParseInt(lo.String, 10, 64)
	b, err2 := strconv.ParseInt(hi.String, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("table %s: shards > 1 need an integer first key column; %q is not", t.Name, t.Key[0])
	}
	span := (float64(b) - float64(a) + 1) / float64(t.Shards)
	for i := range out {
		if i > 0 {
			out[i].Lo = out[i-1].Hi
		}
		if i < t.Shards-1 {
			out[i].Hi = a - 1 + int64(span*float64(i+1))
		}
	}
	return out, nil
}

// prepareTarget runs the setup transaction of one table.
func (r *Runner) prepareTarget(ctx context.Context, t plans.Table, cols []dialect.Column, bounds []dialect.Range) error {
	err := inTx(ctx, r.dst, func(tx *sql.Tx) error {
		q, args := r.dstD.SetupLock("migrate:" + r.plan.Name)
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("setup lock: %w", err)
		}
		for _, ddl := range r.dstD.Helpers() {
			if _, err := tx.ExecContext(ctx, ddl); err != nil {
				return fmt.Errorf("create helper tables: %w", err)
			}
		}
		if err := r.ensureTable(ctx, tx, t, cols); err != nil {
			return err
		}
		if err := r.checkShardCount(ctx, tx, t); err != nil {
			return err
		}
		for i, b := range bounds {
			s := fence.Shard{Plan: r.plan.Name, Table: t.Target, Index: i}
			if err := r.cursor.Init(ctx, tx, s, b.Lo, b.Hi); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("target setup of %s: %w", t.Target, err)
	}
	return nil
}

// checkShardCount refuses a plan whose shard count differs from the one its
// existing checkpoints were made with: the stored key ranges would no longer
// cover the table exactly (fewer shards leave rows out, more overlap).
func (r *Runner) checkShardCount(ctx context.Context, tx *sql.Tx, t plans.Table) error {
	cps, err := r.cursor.List(ctx, tx, r.plan.Name)
	if err != nil {
		return err
	}
	n := 0
	for _, cp := range cps {
		if cp.Shard.Table == t.Target {
			n++
		}
	}
	if n != 0 && n != t.Shards {
		return fmt.Errorf("%w: table %s has %d checkpoints in the target but the plan says shards: %d; the key ranges are fixed at the first run (use a new plan name to re-shard)", plans.ErrInvalid, t.Name, n, t.Shards)
	}
	return nil
}

// ensureTable creates the target table when missing (C4); an existing one
// gets the fence column if it lacks it, and must have a unique index on the
// key. ALTER TABLE runs only when needed: it would queue behind a running
// holder's batches.
func (r *Runner) ensureTable(ctx context.Context, tx *sql.Tx, t plans.Table, cols []dialect.Column) error {
	ident := t.TargetIdent()
	existing, err := columns(ctx, tx, r.dstD, ident)
	if errors.Is(err, errNoTable) {
		mapped, err := dialect.MapColumns(r.srcD, r.dstD, cols)
		if err != nil {
			return err
		}
		ddl := r.dstD.CreateTable(ident, mapped, t.Key, r.plan.FenceColumn)
		r.log.Info("creating target table", "table", t.Target, "ddl", ddl)
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("create table: %w", err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(existing, func(c dialect.Column) bool { return c.Name == r.plan.FenceColumn }) {
		ddl := r.dstD.AddFenceColumn(ident, r.plan.FenceColumn)
		r.log.Info("adding the fence column", "table", t.Target, "ddl", ddl)
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("add fence column: %w", err)
		}
	}
	return r.checkUniqueKey(ctx, tx, t)
}

// checkUniqueKey makes sure an existing target table has a unique index on
// exactly the business key, which the idempotent upsert needs.
func (r *Runner) checkUniqueKey(ctx context.Context, tx *sql.Tx, t plans.Table) error {
	uniq, err := uniqueIndexes(ctx, tx, r.dstD, t.TargetIdent())
	if err != nil {
		return fmt.Errorf("unique keys of %s: %w", t.Target, err)
	}
	want := slices.Sorted(slices.Values(t.Key))
	for _, cols := range uniq {
		if slices.Equal(slices.Sorted(slices.Values(cols)), want) {
			return nil
		}
	}
	return fmt.Errorf("%w: target table %s has no unique index on exactly the key %v; the idempotent upsert needs one", plans.ErrInvalid, t.Target, t.Key)
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
