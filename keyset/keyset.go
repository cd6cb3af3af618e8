// Package keyset reads a table in key order: pages of a key range after a
// key (the copy, the dry run's sample), the batch that ends at a key (a
// takeover's neighbourhood check), rows by key (repair, the target side of
// that check), and a read-ahead that keeps one step ahead of its consumer
// (the copy's pages, verification's row streams). Values are converted for
// the other engine as they are read when the reader has a Convert.
package keyset

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/migrate-dev/migrate/dialect"
)

// SQL is what a reader needs from the dialect of the database it reads.
type SQL interface {
	SelectPage(table []string, cols, key []string, after bool, r dialect.Range, limit int) dialect.Query
	SelectLast(table []string, cols, key []string, r dialect.Range, limit int) dialect.Query
	SelectByKeys(table []string, cols, key []string, n int) string
}

// Convert turns one value as read into the value the other side takes.
type Convert func(col int, v any) (any, error)

// Reader reads rows of Columns of one table, ordered by Key, within Range.
type Reader struct {
	DB      *sql.DB
	SQL     SQL
	Table   []string
	Columns []string // includes every key column
	Key     []string
	Range   dialect.Range
	Limit   int     // rows per page
	Convert Convert // nil: values as read
}

// ConvertError is a value that Convert refused, with its row's key.
type ConvertError struct {
	Key    []any
	Column string
	Err    error
}

func (e *ConvertError) Error() string {
	return fmt.Sprintf("row with key %v: column %q: %v", e.Key, e.Column, e.Err)
}

func (e *ConvertError) Unwrap() error { return e.Err }

// KeyIndexes returns the positions of key's columns among cols.
func KeyIndexes(cols, key []string) ([]int, error) {
	idx := make([]int, len(key))
	for i, k := range key {
		if idx[i] = slices.Index(cols, k); idx[i] < 0 {
			return nil, fmt.Errorf("key column %q is not among the copied columns", k)
		}
	}
	return idx, nil
}

// KeyOf returns the key of row, its columns at idx.
func KeyOf(row []any, idx []int) []any {
	k := make([]any, len(idx))
	for i, j := range idx {
		k[i] = row[j]
	}
	return k
}

// Page reads up to Limit rows after the key after (from the start of the
// range when nil).
func (r *Reader) Page(ctx context.Context, after []any) ([][]any, error) {
	q := r.SQL.SelectPage(r.Table, r.Columns, r.Key, after != nil, r.Range, r.Limit)
	return r.query(ctx, q.SQL, r.bind(q, after)...)
}

// RawPage is Page read by rc without decoding the rows (dialect.RawCopier):
// up to Limit rows after the key after, in the target's binary bulk form
// with token, and their keys.
func (r *Reader) RawPage(ctx context.Context, rc dialect.RawCopier, after []any, token int64) (dialect.RawPage, error) {
	idx, err := KeyIndexes(r.Columns, r.Key)
	if err != nil {
		return dialect.RawPage{}, err
	}
	q := r.SQL.SelectPage(r.Table, r.Columns, r.Key, after != nil, r.Range, r.Limit)
	return rc.ReadRaw(ctx, r.DB, q.SQL, r.bind(q, after), idx, token, r.Limit)
}

// Last reads the batch that ends at key last: up to Limit rows with keys up
// to and including it, within the range, in key order (the last committed
// batch before a resume point).
func (r *Reader) Last(ctx context.Context, last []any) ([][]any, error) {
	q := r.SQL.SelectLast(r.Table, r.Columns, r.Key, r.Range, r.Limit)
	out, err := r.query(ctx, q.SQL, r.bind(q, last)...)
	slices.Reverse(out)
	return out, err
}

// ByKeys reads the rows with the given keys, in no particular order.
func (r *Reader) ByKeys(ctx context.Context, keys [][]any) ([][]any, error) {
	var args []any
	for _, k := range keys {
		args = append(args, k...)
	}
	return r.query(ctx, r.SQL.SelectByKeys(r.Table, r.Columns, r.Key, len(keys)), args...)
}

// bind lays out a query's parameters from its logical values: the key's
// parts (none before the first page), then the range's bounds.
func (r *Reader) bind(q dialect.Query, key []any) []any {
	values := make([]any, len(r.Key), len(r.Key)+2)
	copy(values, key)
	values = append(values, r.Range.Lo, r.Range.Hi)
	return q.Bind(values)
}

// query reads and converts rows; a value Convert refuses is a
// *ConvertError.
func (r *Reader) query(ctx context.Context, q string, args ...any) ([][]any, error) {
	rows, err := r.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out, err := Collect(rows, len(r.Columns), r.Limit)
	if err != nil || r.Convert == nil {
		return out, err
	}
	for _, vals := range out {
		for i, v := range vals {
			if vals[i], err = r.Convert(i, v); err != nil {
				idx, _ := KeyIndexes(r.Columns, r.Key)
				return nil, &ConvertError{Key: KeyOf(vals, idx), Column: r.Columns[i], Err: err}
			}
		}
	}
	return out, nil
}

// Collect reads every row of rows, n columns each, and closes rows; hint is
// the rows expected. The rows share one backing array.
func Collect(rows *sql.Rows, n, hint int) ([][]any, error) {
	defer rows.Close()
	out := make([][]any, 0, hint)
	backing := make([]any, 0, hint*n)
	raw, ptrs := make([]any, n), make([]any, n)
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		backing = append(backing, raw...)
		out = append(out, backing[len(backing)-n:len(backing):len(backing)])
	}
	return out, rows.Err()
}
