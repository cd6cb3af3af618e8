package apply

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/migrate-dev/migrate/keyset"
	"github.com/migrate-dev/migrate/stream"
)

// Table is one copied table as the applier writes it.
type Table struct {
	Schema, Name string   // the source table as its changes name it ("" schema: any)
	Unit         string   // the table's name in the copy's checkpoints (the plan's target name)
	Target       []string // the target table
	Columns      []string // the copied columns; every key column among them
	Key          []string
	Convert      keyset.Convert // nil: values go to the target as read
	// Source reads rows by key from the source, converted like the copy's
	// (a change that did not carry every value: PostgreSQL's unchanged
	// TOAST values of a row the target does not hold yet).
	Source *keyset.Reader

	keyIdx []int    // Key's positions among Columns
	names  []string // the change columns the index below was made for
	from   []int    // for each of Columns, its position among a change's columns
}

// kind is what an op does.
type kind byte

const (
	upsert  kind = 'u' // rows: whole rows in Columns' order
	del     kind = 'd' // keys
	partial kind = 'p' // one row whose unchanged columns are kept: cols, vals, key
)

// op is a run of changes of one kind to one table, applied by one
// statement per chunk. An upsert run holds each key once (the last row:
// whole rows, so the last one is the key's state after the run).
type op struct {
	t    *Table
	kind kind
	rows [][]any // upsert: rows; del: keys
	seen map[string]int
	// partial
	cols []string
	vals []any
	key  []any
}

// plan turns the changes of a group of source transactions into ops, in
// order: consecutive changes of one kind to one table share an op.
type plan struct {
	tables map[[2]string]*Table
	ops    []*op
	n      int // changes
	touch  map[string]bool
}

func newPlan(tables map[[2]string]*Table) *plan {
	return &plan{tables: tables, touch: map[string]bool{}}
}

// add plans one change.
func (p *plan) add(c stream.Change) error {
	t := p.tables[[2]string{c.Schema, c.Table}]
	if t == nil {
		t = p.tables[[2]string{"", c.Table}]
	}
	if t == nil {
		return nil // not a table of the plan
	}
	if err := t.index(c.Columns); err != nil {
		return err
	}
	p.n++
	p.touch[t.Unit] = true
	switch c.Op {
	case stream.Insert:
		row, err := t.row(c.New, nil)
		if err != nil {
			return err
		}
		p.upsert(t, row)
	case stream.Delete:
		key, err := t.oldKey(c)
		if err != nil {
			return err
		}
		p.delete(t, key)
	case stream.Update:
		old, err := t.oldKey(c)
		if err != nil {
			return err
		}
		row, err := t.row(c.New, c.Unchanged)
		if err != nil {
			return err
		}
		key := keyset.KeyOf(row, t.keyIdx)
		if !reflect.DeepEqual(old, key) {
			// A key-changing update: the old key's row goes, the new
			// key's comes (with any unchanged value fetched: partial
			// below finds no row to update under the new key).
			p.delete(t, old)
		}
		if slices.Contains(c.Unchanged, true) {
			p.partial(t, row, key, c.Unchanged)
			return nil
		}
		p.upsert(t, row)
	default:
		return fmt.Errorf("apply: %s.%s: unknown change %s", c.Schema, c.Table, c.Op)
	}
	return nil
}

// last is the current op if it is of kind for t, else a new one.
func (p *plan) last(t *Table, k kind) *op {
	if n := len(p.ops); n > 0 && p.ops[n-1].t == t && p.ops[n-1].kind == k && k != partial {
		return p.ops[n-1]
	}
	o := &op{t: t, kind: k, seen: map[string]int{}}
	p.ops = append(p.ops, o)
	return o
}

func (p *plan) upsert(t *Table, row []any) {
	o := p.last(t, upsert)
	k := fmt.Sprint(keyset.KeyOf(row, t.keyIdx)...)
	if i, ok := o.seen[k]; ok {
		o.rows[i] = row
		return
	}
	o.seen[k] = len(o.rows)
	o.rows = append(o.rows, row)
}

func (p *plan) delete(t *Table, key []any) {
	o := p.last(t, del)
	o.rows = append(o.rows, key)
}

func (p *plan) partial(t *Table, row, key []any, unchanged []bool) {
	o := p.last(t, partial)
	o.key = key
	isKey := map[int]bool{}
	for _, i := range t.keyIdx {
		isKey[i] = true
	}
	for i, c := range t.Columns {
		if !isKey[i] && !unchanged[t.from[i]] {
			o.cols = append(o.cols, c)
			o.vals = append(o.vals, row[i])
		}
	}
	o.rows = [][]any{row} // the whole row, should the target not hold it yet
}

// index maps the table's columns to a change's columns.
func (t *Table) index(names []string) error {
	if slices.Equal(names, t.names) {
		return nil
	}
	if t.keyIdx == nil {
		idx, err := keyset.KeyIndexes(t.Columns, t.Key)
		if err != nil {
			return err
		}
		t.keyIdx = idx
	}
	by := make(map[string]int, len(names))
	for i, n := range names {
		by[n] = i
	}
	from := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		j, ok := by[c]
		if !ok {
			return fmt.Errorf("apply: %s.%s: the change stream has no column %q (a column the copy writes); was the table altered?", t.Schema, t.Name, c)
		}
		from[i] = j
	}
	t.names, t.from = slices.Clone(names), from
	return nil
}

// row is a change's values in the table's column order, converted for the
// target; unchanged values stay nil.
func (t *Table) row(vals []any, unchanged []bool) ([]any, error) {
	row := make([]any, len(t.Columns))
	for i, j := range t.from {
		if unchanged != nil && unchanged[j] {
			continue
		}
		v, err := t.value(i, vals[j])
		if err != nil {
			return nil, &keyset.ConvertError{Key: keyset.KeyOf(row, t.keyIdx), Column: t.Columns[i], Err: err}
		}
		row[i] = v
	}
	return row, nil
}

// value is the value v of column i as the copy writes it.
func (t *Table) value(i int, v any) (any, error) {
	if f, ok := v.(float32); ok {
		v = float64(f) // the copy reads a MySQL FLOAT as a double: exact
	}
	if t.Convert == nil {
		return v, nil
	}
	return t.Convert(i, v)
}

// oldKey is the key of the row an update or a delete changed.
func (t *Table) oldKey(c stream.Change) ([]any, error) {
	key := make([]any, len(t.keyIdx))
	for n, i := range t.keyIdx {
		j := t.from[i]
		if j >= len(c.Old) || (c.OldHas != nil && !c.OldHas[j]) {
			return nil, fmt.Errorf("apply: %s.%s: a %s did not carry the old value of key column %q: the source must log it (PostgreSQL: ALTER TABLE … REPLICA IDENTITY FULL, or a replica identity index on the key)",
				t.Schema, t.Name, c.Op, t.Columns[i])
		}
		v, err := t.value(i, c.Old[j])
		if err != nil {
			return nil, &keyset.ConvertError{Column: t.Columns[i], Err: err}
		}
		key[n] = v
	}
	return key, nil
}
