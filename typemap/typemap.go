// Package typemap is what the tool knows of each engine's column types: the
// target type a source column becomes when a missing table is created
// (MapColumns), the conversion of a value read from one engine for the
// other (Converter), and how a column's values are compared (KindOf, Pair).
// Each engine's type names are listed once, in one table (postgresTypes,
// mysqlTypes), which says for each its kind, its mapping to the other
// engine and what else its values need; the SQL built around a type
// (casts, text forms) stays in package dialect, which asks here.
package typemap

import (
	"regexp"
	"strings"
)

// Column describes one column of a table as its engine reports it.
type Column struct {
	Name    string
	Type    string // the engine's own type text, e.g. "numeric(12,2)"
	Base    string // the type's name without modifiers, lower case, e.g. "numeric"
	NotNull bool
	// Values are the members of an ENUM or SET (MySQL) or the labels of
	// an enum type (PostgreSQL), in order; nil for other types.
	Values []string
	// Sequenced: the engine generates the column's values (AUTO_INCREMENT,
	// an identity, a serial). MapColumns then gives it an integer type the
	// target engine can generate; whoever creates the table sets it.
	Sequenced bool
}

// Kind is how a column's values are compared: the canonical form two
// values are put in before they are (package verify).
type Kind int

// The kinds. A base type in neither engine's table is Text.
const (
	Text Kind = iota
	Char      // text whose trailing spaces do not count
	Bytes
	Number // integers and decimals
	Float
	Bool
	Timestamp
	Date
	Time // a time of day, or MySQL's TIME interval
	UUID
	JSON
)

// KindOf is the kind of a base type of either engine. The name is looked up
// in both engines' tables, which agree on every name they share: a column
// may carry the other engine's spelling (a type named in the plan, e.g.
// "boolean" for MySQL), and a caller comparing rows need not know the
// engines.
func KindOf(base string) Kind {
	if t, ok := postgresTypes[base]; ok {
		return t.kind
	}
	return mysqlTypes[base].kind
}

// Pair is how one column of the source and its target counterpart (their
// base types) are compared: by the looser of the two kinds (a boolean
// against a tinyint(1) compares as booleans, a char against a varchar
// without trailing spaces).
func Pair(src, dst string) Kind {
	a, b := KindOf(src), KindOf(dst)
	switch {
	case a == b:
		return a
	case a == Bool || b == Bool:
		return Bool
	case a == UUID || b == UUID:
		return UUID
	case a == JSON || b == JSON:
		return JSON
	case a == Timestamp || b == Timestamp:
		return Timestamp
	case a == Char || b == Char:
		return Char
	}
	return a
}

// MySQLBinary reports whether values of a MySQL base type are bytes, not
// text.
func MySQLBinary(base string) bool { return mysqlTypes[base].binary }

var argsRe = regexp.MustCompile(`\(([^)]*)\)`)

// args returns a type's modifiers: "numeric(12,2)" gives ["12", "2"].
func args(typ string) []string {
	m := argsRe.FindStringSubmatch(typ)
	if m == nil {
		return nil
	}
	parts := strings.Split(m[1], ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// baseOf is a type text without modifiers, lower case.
func baseOf(typ string) string {
	return strings.TrimSpace(argsRe.ReplaceAllString(strings.ToLower(typ), ""))
}

func firstOr(a []string, def string) string {
	if len(a) > 0 && a[0] != "" {
		return a[0]
	}
	return def
}
