package dialect

import "strings"

// The statements of `migrate drill` (package drill): counting what an old
// holder may have left behind in a shard, resetting a drill's target, and
// the stream drills' writes to the source.

// drillWhere is the WHERE clause of DrillCount: the key after a given key
// (logical values 0..n-1) when after, and the shard range (lo is value n,
// hi value n+1); ph adds a parameter and returns its placeholder.
func drillWhere(d interface{ Quote(...string) string }, key []string, after bool, r Range, ph func(int) string) string {
	var where []string
	if after {
		p := make([]string, len(key))
		for i := range key {
			p[i] = ph(i)
		}
		where = append(where, "("+quoteList(d, key)+") > ("+strings.Join(p, ", ")+")")
	}
	if r.Lo != nil {
		where = append(where, d.Quote(key[0])+" > "+ph(len(key)))
	}
	if r.Hi != nil {
		where = append(where, d.Quote(key[0])+" <= "+ph(len(key)+1))
	}
	if len(where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(where, " AND ")
}

// drillInsert is DrillInsert; ph(i) is the placeholder of the i-th
// parameter, from 1.
func drillInsert(d interface{ Quote(...string) string }, table, cols []string, ph func(int) string) string {
	p := make([]string, len(cols))
	for i := range cols {
		p[i] = ph(i + 1)
	}
	return "INSERT INTO " + d.Quote(table...) + " (" + quoteList(d, cols) + ") VALUES (" + strings.Join(p, ", ") + ")"
}

// drillUpdate is DrillUpdate; ph as for drillInsert.
func drillUpdate(d interface{ Quote(...string) string }, table, cols, key []string, ph func(int) string) string {
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = d.Quote(c) + " = " + ph(i+1)
	}
	where := make([]string, len(key))
	for i, k := range key {
		where[i] = d.Quote(k) + " = " + ph(len(cols)+i+1)
	}
	return "UPDATE " + d.Quote(table...) + " SET " + strings.Join(set, ", ") + " WHERE " + strings.Join(where, " AND ")
}
