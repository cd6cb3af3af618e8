// Package schema reads and prepares tables: a table's columns and unique
// indexes, the checks a source table must pass to be copied by keyset (a
// NOT NULL, unique, orderable business key), what an existing or missing
// target table needs (C4: the CREATE TABLE of the mapped columns, or the
// fence column added), the shard bounds at quantiles of the key, and the
// setup lock instances take while they prepare a target.
package schema

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
)

// ErrNoTable means a table does not exist.
var ErrNoTable = dialect.ErrNoTable

// Querier is a pool, a connection or a transaction.
type Querier = dialect.Querier

// Columns lists a table's columns in ordinal order, or ErrNoTable.
func Columns(ctx context.Context, db Querier, d dialect.Dialect, table []string) ([]dialect.Column, error) {
	q, args := d.TableExists(table)
	var exists bool
	if err := db.QueryRowContext(ctx, q, args...).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, ErrNoTable
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

// Collation is how a column compares its values (dialect.Catalog.Collations).
type Collation struct {
	Name     string
	Bytewise bool // the collation finds values equal only when their bytes are
	Trims    bool // the column's type drops or ignores trailing spaces
}

// Collations are the collations of a table's columns that have one, by
// column name.
func Collations(ctx context.Context, db Querier, d dialect.Catalog, table []string) (map[string]Collation, error) {
	q, args := d.Collations(table)
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Collation{}
	for rows.Next() {
		var col string
		var c Collation
		if err := rows.Scan(&col, &c.Name, &c.Bytewise, &c.Trims); err != nil {
			return nil, err
		}
		out[col] = c
	}
	return out, rows.Err()
}

// UniqueIndexes returns the column lists of a table's unique indexes and
// constraints, columns in index order.
func UniqueIndexes(ctx context.Context, db Querier, d dialect.Dialect, table []string) ([][]string, error) {
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

// Align returns the columns of a table (all) matching cols by name, in the
// order of cols.
func Align(all, cols []dialect.Column) ([]dialect.Column, error) {
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

// Diff describes how columns now differ from was ("" when equal): added,
// retyped, nullability changed, dropped.
func Diff(was, now []dialect.Column) string {
	before := map[string]dialect.Column{}
	for _, c := range was {
		before[c.Name] = c
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range now {
		seen[c.Name] = true
		b, ok := before[c.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("column %q added", c.Name))
		case b.Type != c.Type:
			out = append(out, fmt.Sprintf("column %q changed type from %s to %s", c.Name, b.Type, c.Type))
		case b.NotNull != c.NotNull:
			out = append(out, fmt.Sprintf("column %q changed nullability", c.Name))
		}
	}
	for _, c := range was {
		if !seen[c.Name] {
			out = append(out, fmt.Sprintf("column %q dropped", c.Name))
		}
	}
	return strings.Join(out, ", ")
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
