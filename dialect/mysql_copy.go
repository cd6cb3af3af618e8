package dialect

import (
	"maps"
	"strconv"
	"strings"
)

// floatCols are the FLOAT columns of the tables a MySQL was given by
// WithColumns: column names by quoted table name. One is never changed
// once made (a MySQL is copied freely, and read by every shard at once).
type floatCols map[string]map[string]bool

// withColumns implements columnAware: it keeps table's FLOAT columns.
func (m MySQL) withColumns(table []string, cols []Column) Dialect {
	next := floatCols{}
	if m.floats != nil {
		maps.Copy(next, *m.floats)
	}
	set := map[string]bool{}
	for _, c := range cols {
		if c.Base == "float" {
			set[c.Name] = true
		}
	}
	next[m.Quote(table...)] = set
	m.floats = &next
	return m
}

// asDouble reads a FLOAT column (quoted) as a double: the widening is
// exact, and a double goes exactly by either protocol, whereas the text
// protocol (a statement without bind parameters, or every statement with
// interpolateParams=true) sends a FLOAT with six significant digits.
func asDouble(col string) string { return col + " + 0e0" }

// selectList is cols of table quoted, the FLOAT columns WithColumns named
// read as doubles.
func (m MySQL) selectList(table []string, cols []string) string {
	var floats map[string]bool
	if m.floats != nil {
		floats = (*m.floats)[m.Quote(table...)]
	}
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = m.Quote(c)
		if floats[c] {
			sel[i] = asDouble(sel[i])
		}
	}
	return strings.Join(sel, ", ")
}

// SelectPage implements Dialect. The keyset condition is spelled out
// (k1 > ? OR (k1 = ? AND k2 > ?) …) behind k1 >= ?, which MySQL's range
// optimizer uses; a row-value comparison is not always indexed there.
func (m MySQL) SelectPage(table []string, cols, key []string, after bool, r Range, limit int) Query {
	var q Query
	ph := func(arg int) string { q.Args = append(q.Args, arg); return "?" }
	var where []string
	if after {
		where = append(where, m.keyset(key, 0, false, ph))
	}
	if r.Lo != nil {
		where = append(where, m.Quote(key[0])+" > "+ph(len(key)))
	}
	if r.Hi != nil {
		where = append(where, m.Quote(key[0])+" <= "+ph(len(key)+1))
	}
	var b strings.Builder
	b.WriteString("SELECT " + m.selectList(table, cols) + " FROM " + m.Quote(table...))
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY " + m.quoteList(key) + " LIMIT " + strconv.Itoa(limit))
	q.SQL = b.String()
	return q
}

// keyset compares the key with the key given as logical values first…:
// key > given, or key <= given when upTo. Composite keys are spelled out
// behind a condition on k1 alone, which MySQL's range optimizer uses; a
// row-value comparison is not always indexed there:
// k1 >= ? AND (k1 > ? OR (k1 = ? AND k2 > ?) …), and for upTo
// k1 <= ? AND (k1 < ? OR (k1 = ? AND k2 < ?) … OR (all equal)).
func (m MySQL) keyset(key []string, first int, upTo bool, ph func(int) string) string {
	op, strict := " > ", " >= "
	if upTo {
		op, strict = " < ", " <= "
	}
	if len(key) == 1 {
		if upTo {
			return m.Quote(key[0]) + " <= " + ph(first)
		}
		return m.Quote(key[0]) + " > " + ph(first)
	}
	lead := m.Quote(key[0]) + strict + ph(first) // placeholders in order
	eq := func(n int) []string {
		var and []string
		for j := range n {
			and = append(and, m.Quote(key[j])+" = "+ph(first+j))
		}
		return and
	}
	var or []string
	for i := range key {
		or = append(or, "("+strings.Join(append(eq(i), m.Quote(key[i])+op+ph(first+i)), " AND ")+")")
	}
	if upTo {
		or = append(or, "("+strings.Join(eq(len(key)), " AND ")+")")
	}
	return lead + " AND (" + strings.Join(or, " OR ") + ")"
}

// SelectLast implements Dialect, the keyset condition spelled out as in
// SelectPage: k1 <= ? AND (k1 < ? OR (k1 = ? AND k2 < ?) … OR (all equal)).
func (m MySQL) SelectLast(table []string, cols, key []string, r Range, limit int) Query {
	var q Query
	ph := func(arg int) string { q.Args = append(q.Args, arg); return "?" }
	where := []string{m.keyset(key, 0, true, ph)}
	if r.Lo != nil {
		where = append(where, m.Quote(key[0])+" > "+ph(len(key)))
	}
	if r.Hi != nil {
		where = append(where, m.Quote(key[0])+" <= "+ph(len(key)+1))
	}
	desc := make([]string, len(key))
	for i, k := range key {
		desc[i] = m.Quote(k) + " DESC"
	}
	q.SQL = "SELECT " + m.selectList(table, cols) + " FROM " + m.Quote(table...) + " WHERE " + strings.Join(where, " AND ") +
		" ORDER BY " + strings.Join(desc, ", ") + " LIMIT " + strconv.Itoa(limit)
	return q
}

// Upsert implements Dialect. MySQL applies ON DUPLICATE KEY UPDATE
// assignments left to right, each seeing the ones before: every column is
// guarded by the stored fence, and the fence itself is assigned last.
func (m MySQL) Upsert(table []string, cols, key []string, fence string, rows int) Upsert {
	var b strings.Builder
	b.WriteString("INSERT INTO " + m.Quote(table...) + " (" + m.quoteList(cols) + ", " + m.Quote(fence) + ") VALUES ")
	row := "(" + strings.Repeat("?, ", len(cols)) + "?)"
	for r := 0; r < rows; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	in := func(c string) string { return "VALUES(" + m.Quote(c) + ")" }
	if m.RowAlias {
		b.WriteString(" AS `new`")
		in = func(c string) string { return "`new`." + m.Quote(c) }
	}
	f := m.Quote(fence)
	guard := f + " <= " + in(fence)
	isKey := map[string]bool{}
	for _, k := range key {
		isKey[k] = true
	}
	var set []string
	for _, c := range cols {
		if !isKey[c] {
			set = append(set, m.Quote(c)+" = IF("+guard+", "+in(c)+", "+m.Quote(c)+")")
		}
	}
	set = append(set, f+" = IF("+guard+", "+in(fence)+", "+f+")")
	b.WriteString(" ON DUPLICATE KEY UPDATE " + strings.Join(set, ", "))
	return Upsert{SQL: b.String(), TokenPerRow: true, Probe: m.probe(table, key, fence, rows)}
}

// probe counts, among the batch's keys, the rows that exist and those whose
// stored token is newer than ? (the first parameter).
func (m MySQL) probe(table []string, key []string, fence string, rows int) string {
	return "SELECT COUNT(*), COALESCE(SUM(" + m.Quote(fence) + " > ?), 0) FROM " + m.Quote(table...) +
		" WHERE " + m.keysIn(key, rows)
}

// keysIn is "k IN (?, …)" or "(k1, k2) IN ((?, ?), …)" for n keys, and
// for one key of several columns "(k1 = ? AND k2 = ?)": MariaDB (10.11)
// reads a whole table for a DELETE or an UPDATE whose row IN holds a
// single tuple (EXPLAIN: type ALL; a range from two tuples on), which
// made the change stream's one-row deletes take seconds and lock every
// row on the way.
func (m MySQL) keysIn(key []string, n int) string {
	if n == 1 && len(key) > 1 {
		eq := make([]string, len(key))
		for i, k := range key {
			eq[i] = m.Quote(k) + " = ?"
		}
		return "(" + strings.Join(eq, " AND ") + ")"
	}
	tuple := "?"
	cols := m.Quote(key[0])
	if len(key) > 1 {
		tuple = "(" + strings.TrimSuffix(strings.Repeat("?, ", len(key)), ", ") + ")"
		cols = "(" + m.quoteList(key) + ")"
	}
	return cols + " IN (" + strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", ") + ")"
}

// SelectByKeys implements Dialect.
func (m MySQL) SelectByKeys(table []string, cols, key []string, n int) string {
	return "SELECT " + m.selectList(table, cols) + " FROM " + m.Quote(table...) + " WHERE " + m.keysIn(key, n)
}

// DeleteByKeys implements Dialect.
func (m MySQL) DeleteByKeys(table []string, key []string, n int) string {
	return "DELETE FROM " + m.Quote(table...) + " WHERE " + m.keysIn(key, n)
}

// MaxParams implements Dialect.
func (MySQL) MaxParams() int { return 65535 }
