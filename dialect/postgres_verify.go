package dialect

import (
	"strconv"
	"strings"
)

// ScanOrdered implements Dialect: text key columns are ordered by the
// bytes of their text form (::text COLLATE "C", which works for any type:
// uuid, inet, enums).
func (p Postgres) ScanOrdered(table []string, cols []Column, key []string, textKey []bool, lo, hi bool) Query {
	order := make([]string, len(key))
	for i, k := range key {
		order[i] = p.Quote(k)
		if textKey[i] {
			order[i] += `::text COLLATE "C"`
		}
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	var q Query
	q.SQL = "SELECT " + p.quoteList(names) + " FROM " + p.Quote(table...) + p.keyRange(&q, key, lo, hi) +
		" ORDER BY " + strings.Join(order, ", ")
	return q
}

// keyRange is the WHERE clause " WHERE (key) > (lo) AND (key) <= (hi)" for
// the bounds asked, adding their parameters to q: lo's parts are the logical
// values 0..n-1, hi's n..2n-1.
func (p Postgres) keyRange(q *Query, key []string, lo, hi bool) string {
	var where []string
	bound := func(first int, op string) {
		ph := make([]string, len(key))
		for i := range key {
			q.Args = append(q.Args, first+i)
			ph[i] = "$" + strconv.Itoa(len(q.Args))
		}
		where = append(where, "("+p.quoteList(key)+")"+op+"("+strings.Join(ph, ", ")+")")
	}
	if lo {
		bound(0, " > ")
	}
	if hi {
		bound(len(key), " <= ")
	}
	if len(where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(where, " AND ")
}

// ChunkEnd implements Dialect.
func (p Postgres) ChunkEnd(table []string, key []string, lo bool, n int) Query {
	var q Query
	q.SQL = "SELECT " + p.quoteList(key) + " FROM " + p.Quote(table...) + p.keyRange(&q, key, lo, false) +
		" ORDER BY " + p.quoteList(key) + " LIMIT 1 OFFSET " + strconv.Itoa(n-1)
	return q
}

// Checksum implements Dialect: md5 of the rows' record texts in key order,
// where NULL and an empty string differ and every value is quoted, so that
// the texts joined need no separator. string_agg takes them in the sorted
// subquery's order (an ORDER BY inside the aggregate would sort again); were
// it ever not so, the hashes would differ and the rows be compared, which
// costs time, never a wrong answer. timestamptz in UTC, so the session's
// time zone does not matter; floats by their binary form, exact whatever
// extra_float_digits says.
func (p Postgres) Checksum(table []string, cols []Column, key []string, lo, hi bool) Query {
	vals := make([]string, len(cols))
	for i, c := range cols {
		vals[i] = p.Quote(c.Name)
		switch c.Base {
		case "timestamp with time zone":
			vals[i] = "(" + vals[i] + " AT TIME ZONE 'UTC')"
		case "double precision":
			vals[i] = "float8send(" + vals[i] + ")"
		case "real":
			vals[i] = "float4send(" + vals[i] + ")"
		}
	}
	var q Query
	q.SQL = "SELECT count(*), coalesce(md5(string_agg(r, '')), '') FROM (SELECT row(" + strings.Join(vals, ", ") +
		")::text AS r FROM " + p.Quote(table...) + p.keyRange(&q, key, lo, hi) + " ORDER BY " + p.quoteList(key) + ") s"
	return q
}

// OrderedByValue implements Dialect.
func (Postgres) OrderedByValue(c Column) bool {
	switch c.Base {
	case "smallint", "integer", "bigint", "numeric", "date", "uuid", "bytea",
		"timestamp without time zone", "timestamp with time zone", "time without time zone":
		return true
	}
	return false
}
