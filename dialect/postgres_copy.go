package dialect

import (
	"strconv"
	"strings"
)

// SelectPage implements Dialect with a row-value comparison.
func (p Postgres) SelectPage(table []string, cols, key []string, after bool, r Range, limit int) Query {
	var q Query
	var b strings.Builder
	b.WriteString("SELECT " + p.quoteList(cols) + " FROM " + p.Quote(table...))
	var where []string
	next := func(arg int) string { q.Args = append(q.Args, arg); return "$" + strconv.Itoa(len(q.Args)) }
	if after {
		ph := make([]string, len(key))
		for i := range key {
			ph[i] = next(i)
		}
		where = append(where, "("+p.quoteList(key)+") > ("+strings.Join(ph, ", ")+")")
	}
	if r.Lo != nil {
		where = append(where, p.Quote(key[0])+" > "+next(len(key)))
	}
	if r.Hi != nil {
		where = append(where, p.Quote(key[0])+" <= "+next(len(key)+1))
	}
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY " + p.quoteList(key) + " LIMIT " + strconv.Itoa(limit))
	q.SQL = b.String()
	return q
}

// SelectLast implements Dialect with a row-value comparison.
func (p Postgres) SelectLast(table []string, cols, key []string, r Range, limit int) Query {
	var q Query
	next := func(arg int) string { q.Args = append(q.Args, arg); return "$" + strconv.Itoa(len(q.Args)) }
	ph := make([]string, len(key))
	desc := make([]string, len(key))
	for i, k := range key {
		ph[i] = next(i)
		desc[i] = p.Quote(k) + " DESC"
	}
	where := []string{"(" + p.quoteList(key) + ") <= (" + strings.Join(ph, ", ") + ")"}
	if r.Lo != nil {
		where = append(where, p.Quote(key[0])+" > "+next(len(key)))
	}
	if r.Hi != nil {
		where = append(where, p.Quote(key[0])+" <= "+next(len(key)+1))
	}
	q.SQL = "SELECT " + p.quoteList(cols) + " FROM " + p.Quote(table...) + " WHERE " + strings.Join(where, " AND ") +
		" ORDER BY " + strings.Join(desc, ", ") + " LIMIT " + strconv.Itoa(limit)
	return q
}

// Upsert implements Dialect. The token is one parameter after the row
// values, shared by every row. OVERRIDING SYSTEM VALUE writes the source's
// values into a GENERATED ALWAYS identity column (the server accepts it,
// and ignores it, on a table without one). xmax = 0 tells an inserted row from an updated
// one; rows whose stored token is newer are neither.
func (p Postgres) Upsert(table []string, cols, key []string, fence string, rows int) Upsert {
	var b strings.Builder
	tok := "$" + strconv.Itoa(rows*len(cols)+1)
	b.WriteString("WITH w AS (INSERT INTO " + p.Quote(table...) + " AS t (" + p.quoteList(cols) + ", " + p.Quote(fence) + ") OVERRIDING SYSTEM VALUE VALUES ")
	n := 0
	for r := 0; r < rows; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for range cols {
			n++
			b.WriteString("$" + strconv.Itoa(n) + ", ")
		}
		b.WriteString(tok + ")")
	}
	isKey := map[string]bool{}
	for _, k := range key {
		isKey[k] = true
	}
	var set []string
	for _, c := range cols {
		if !isKey[c] {
			set = append(set, p.Quote(c)+" = EXCLUDED."+p.Quote(c))
		}
	}
	f := p.Quote(fence)
	set = append(set, f+" = EXCLUDED."+f)
	b.WriteString(" ON CONFLICT (" + p.quoteList(key) + ") DO UPDATE SET " + strings.Join(set, ", "))
	b.WriteString(" WHERE t." + f + " <= EXCLUDED." + f)
	b.WriteString(" RETURNING (xmax = 0) AS ins) SELECT count(*) FILTER (WHERE ins), count(*) FILTER (WHERE NOT ins) FROM w")
	return Upsert{SQL: b.String(), Returns: true}
}

// MaxParams implements Dialect.
func (Postgres) MaxParams() int { return 65535 }

// keysIn is "(k1, k2) IN (($1, $2), …)" for n keys, parameters from $1.
func (p Postgres) keysIn(key []string, n int) string {
	var b strings.Builder
	b.WriteString("(" + p.quoteList(key) + ") IN (")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j := range key {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("$" + strconv.Itoa(i*len(key)+j+1))
		}
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String()
}

// SelectByKeys implements Dialect.
func (p Postgres) SelectByKeys(table []string, cols, key []string, n int) string {
	return "SELECT " + p.quoteList(cols) + " FROM " + p.Quote(table...) + " WHERE " + p.keysIn(key, n)
}

// DeleteByKeys implements Dialect.
func (p Postgres) DeleteByKeys(table []string, key []string, n int) string {
	return "DELETE FROM " + p.Quote(table...) + " WHERE " + p.keysIn(key, n)
}
