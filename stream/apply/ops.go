package apply

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

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
// statement per chunk. Its rows hold each key once (seen: key -> index);
// an upsert's rows are whole rows, so a key's last row is its state after
// the run. A row set to nil was deleted after it (by plan, not exact).
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

// plan turns the changes of a group of source transactions into ops.
//
// By key (exact false, the first try), the changes of one table that
// follow each other without a change of another table or a partial update
// between them form a segment of two ops: one delete of the keys deleted
// in it, then one upsert of the rows upserted in it and not deleted after,
// each key's last row in the order the keys first came. Whole-row upserts
// and deletes by key make each key's end state in the target its end
// state in the segment, in two statements however the changes interleave.
// Deletes only move earlier (they never take a unique value another row
// still holds); the order between tables stays the source's.
//
// In source order (exact), each run of changes of one kind to one table
// is an op, broken where a key comes again: what a change meets in the
// target is what it met at the source. It is the fallback for a target
// that refuses the segments (a constraint between the rows of one table,
// such as a foreign key to itself).
type plan struct {
	tables map[[2]string]*Table
	exact  bool
	ops    []*op
	n      int // changes
	touch  map[string]bool
	// the open segment: its table (nil: none) and its two ops (nil: not yet)
	segT          *Table
	segDel, segUp *op
}

func newPlan(tables map[[2]string]*Table, exact bool) *plan {
	return &plan{tables: tables, exact: exact, touch: map[string]bool{}}
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

// newOp appends an op of kind for t.
func (p *plan) newOp(t *Table, k kind) *op {
	o := &op{t: t, kind: k, seen: map[string]int{}}
	p.ops = append(p.ops, o)
	return o
}

// run is the last op if it is of kind for t and does not hold key k yet
// (source order), else a new one.
func (p *plan) run(t *Table, k kind, key string) *op {
	if n := len(p.ops); n > 0 {
		if o := p.ops[n-1]; o.t == t && o.kind == k {
			if _, again := o.seen[key]; !again {
				return o
			}
		}
	}
	return p.newOp(t, k)
}

// segment makes the open segment t's, opening a new one unless it is.
func (p *plan) segment(t *Table) {
	if p.segT != t {
		p.segT, p.segDel, p.segUp = t, nil, nil
	}
}

func (p *plan) upsert(t *Table, row []any) {
	k := keyString(keyset.KeyOf(row, t.keyIdx))
	var o *op
	if p.exact {
		o = p.run(t, upsert, k)
	} else {
		p.segment(t)
		if p.segUp == nil {
			p.segUp = p.newOp(t, upsert)
		}
		o = p.segUp
		if i, ok := o.seen[k]; ok {
			o.rows[i] = row
			return
		}
	}
	o.seen[k] = len(o.rows)
	o.rows = append(o.rows, row)
}

func (p *plan) delete(t *Table, key []any) {
	k := keyString(key)
	var o *op
	if p.exact {
		o = p.run(t, del, k)
	} else {
		p.segment(t)
		if u := p.segUp; u != nil {
			if i, ok := u.seen[k]; ok { // upserted earlier in the segment: the delete ends it
				u.rows[i] = nil
				delete(u.seen, k)
			}
		}
		if p.segDel == nil {
			p.segDel = &op{t: t, kind: del, seen: map[string]int{}}
			if p.segUp == nil {
				p.ops = append(p.ops, p.segDel)
			} else { // before the segment's upsert, the segment's last op
				n := len(p.ops)
				p.ops = append(p.ops[:n-1], p.segDel, p.segUp)
			}
		}
		o = p.segDel
		if _, ok := o.seen[k]; ok {
			return
		}
	}
	o.seen[k] = len(o.rows)
	o.rows = append(o.rows, key)
}

// partial is an op of its own, after the open segment (which it closes).
func (p *plan) partial(t *Table, row, key []any, unchanged []bool) {
	p.segT = nil
	o := p.newOp(t, partial)
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

// keyString is a key as a map key: each value with its type and length, so
// that no two keys share one ("a b","c" and "a","b c").
func keyString(key []any) string {
	var b strings.Builder
	for _, v := range key {
		var s string
		switch v := v.(type) {
		case nil:
			b.WriteString("n")
		case int64:
			b.WriteString("i")
			s = strconv.FormatInt(v, 10)
		case string:
			b.WriteString("s")
			s = v
		case []byte:
			b.WriteString("b")
			s = string(v)
		default:
			b.WriteString(reflect.TypeOf(v).String())
			s = fmt.Sprint(v)
		}
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
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
