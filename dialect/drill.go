package dialect

import "strings"

// The statements of `migrate drill` (package drill): counting what an old
// holder may have left behind in a shard, and resetting a drill's target.

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
