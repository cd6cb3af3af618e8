package typemap

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/plans"
)

// maxKeyBytes is the longest InnoDB index key: text and bytea key columns
// mapped to MySQL share what the key's other columns leave of it.
const maxKeyBytes = 3072

// intWidth is a MySQL integer type with a display width.
var intWidth = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|bigint)\(\d+\)`)

// MapColumns translates source column definitions into the target engine's
// types, for creating a missing target table (C4). overrides (column ->
// target type text, the plan's `types`) win. A type with no mapping is an
// error naming table.column and type.
func MapColumns(from, to plans.Engine, table string, cols []Column, key []string, overrides map[string]string) ([]Column, error) {
	share, err := keyShare(from, to, cols, key, overrides)
	if err != nil {
		return nil, err
	}
	out := make([]Column, len(cols))
	var errs []string
	for i, c := range cols {
		out[i] = c
		if from != to && c.Base == "set" {
			// A SET's value is a list of members: no column of the
			// other engine checks it against them (its text is kept).
			out[i].Values = nil
		}
		if t, ok := overrides[c.Name]; ok {
			if why := overridable(from, to, c, t); why != "" {
				errs = append(errs, fmt.Sprintf("%s.%s: %s", table, c.Name, why))
			}
			out[i].Type, out[i].Base = t, baseOf(t)
			continue
		}
		var t string
		var err error
		switch {
		case from == to && to == plans.MySQL && c.Base == "json":
			t = "json" // MariaDB shows JSON as longtext
		case from == to && to == plans.MySQL && intWidth.MatchString(c.Type) && c.Type != "tinyint(1)":
			t = intWidth.ReplaceAllString(c.Type, "$1") // display widths are deprecated in MySQL 8
		case from == to:
			t = c.Type
		case from == plans.Postgres:
			t, err = pgToMySQL(c, slices.Contains(key, c.Name), share)
		default:
			t, err = mySQLToPG(c)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s.%s: %v", table, c.Name, err))
			continue
		}
		out[i].Type, out[i].Base = t, baseOf(t)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: no %s type for %s; name one in the plan: types: {column: \"type\"}",
			plans.ErrInvalid, to, strings.Join(errs, "; "))
	}
	return out, nil
}

// keyShare is the bytes each unbounded (text, bytea) key column of a
// PostgreSQL table gets in a MySQL key: what the other key columns leave of
// maxKeyBytes, shared equally.
func keyShare(from, to plans.Engine, cols []Column, key []string, overrides map[string]string) (int, error) {
	if from != plans.Postgres || to != plans.MySQL {
		return 0, nil
	}
	budget, unbounded := maxKeyBytes, 0
	for _, c := range cols {
		if !slices.Contains(key, c.Name) {
			continue
		}
		t, ok := overrides[c.Name]
		if !ok {
			if unboundedKey(c) {
				unbounded++
				continue
			}
			t, _ = pgToMySQL(c, true, 0)
		}
		budget -= mysqlKeyBytes(t)
	}
	if unbounded > 0 && budget/unbounded < 4 {
		return 0, fmt.Errorf("%w: the key %v leaves no room in MySQL's %d-byte index key for its text columns; name their types in the plan: types: {column: \"varchar(n)\"}", plans.ErrInvalid, key, maxKeyBytes)
	}
	return budget / max(unbounded, 1), nil
}
