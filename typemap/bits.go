package typemap

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/migrate-dev/migrate/plans"
)

// MySQL's bit and spatial columns have no PostgreSQL mapping: a plan names
// the type (types:), and their values — a bit's bytes, big-endian; a
// geometry's SRID (4 bytes) and WKB — are converted for it.

// bitTargets are the PostgreSQL base types a MySQL bit converts to, as a
// plan or the catalog spells them.
var bitTargets = map[string]bool{
	"boolean": true, "bool": true, "smallint": true, "int2": true, "integer": true, "int": true, "int4": true,
	"bigint": true, "int8": true, "numeric": true, "decimal": true, "bytea": true,
	"bit": true, "bit varying": true, "varbit": true,
}

// bitTargetNames name bitTargets in errors.
var bitTargetNames = []string{"boolean", "smallint", "integer", "bigint", "numeric", "bit(n)", "bit varying(n)", "bytea"}

// geometry: a MySQL spatial base type.
func geometry(base string) bool {
	switch base {
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection", "geomcollection":
		return true
	}
	return false
}

// convertible says why a MySQL column src cannot be copied into a
// PostgreSQL column of type dst (a plan's types:, or an existing table's),
// or "" when it can.
func convertible(src Column, dst string) string {
	base := baseOf(dst)
	switch {
	case src.Base == "bit" && !bitTargets[base]:
		return fmt.Sprintf("%s does not convert to %s (it does to %s)", src.Type, dst, strings.Join(bitTargetNames, ", "))
	case geometry(src.Base) && base != "bytea":
		return fmt.Sprintf("%s does not convert to %s (it does to bytea, as WKB)", src.Type, dst)
	}
	return ""
}

// Convertible checks that every source column can be copied into its
// target column (the same index) between the engines: an error naming
// table.column and what the plan can name instead.
func Convertible(from, to plans.Engine, table string, src, dst []Column) error {
	if from != plans.MySQL || to != plans.Postgres {
		return nil
	}
	var errs []string
	for i, c := range src {
		if why := convertible(c, dst[i].Type); why != "" {
			errs = append(errs, table+"."+c.Name+": "+why)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", plans.ErrInvalid, strings.Join(errs, "; "))
	}
	return nil
}

// bitValue is a MySQL bit value (its bytes, big-endian) as a number.
func bitValue(b []byte) (uint64, error) {
	if len(b) > 8 {
		return 0, fmt.Errorf("bit value of %d bytes", len(b))
	}
	var n uint64
	for _, x := range b {
		n = n<<8 | uint64(x)
	}
	return n, nil
}

// bitToPG converts a MySQL bit value for a PostgreSQL column of type dst.
func bitToPG(src, dst Column, b []byte) (any, error) {
	n, err := bitValue(b)
	if err != nil {
		return nil, err
	}
	limit := func(max uint64) (any, error) {
		if n > max {
			return nil, fmt.Errorf("bit value %d is out of range for %s", n, dst.Type)
		}
		return int64(n), nil
	}
	switch dst.Base {
	case "boolean", "bool":
		if n > 1 {
			return nil, fmt.Errorf("bit value %d is not a boolean; name another type in the plan: types: {column: \"integer\"}", n)
		}
		return n == 1, nil
	case "smallint", "int2":
		return limit(math.MaxInt16)
	case "integer", "int", "int4":
		return limit(math.MaxInt32)
	case "bigint", "int8":
		return limit(math.MaxInt64)
	case "numeric", "decimal":
		return strconv.FormatUint(n, 10), nil
	case "bytea":
		return b, nil
	case "bit", "bit varying", "varbit":
		// As many digits as the target's bit(n) has, else the source's.
		width, _ := strconv.Atoi(firstOr(args(src.Type), "1"))
		if a := args(dst.Type); dst.Base == "bit" && len(a) == 1 {
			width, _ = strconv.Atoi(a[0])
		}
		s := strconv.FormatUint(n, 2)
		if len(s) > width {
			return nil, fmt.Errorf("bit value %s does not fit %s", s, dst.Type)
		}
		return strings.Repeat("0", width-len(s)) + s, nil
	}
	return nil, fmt.Errorf("%s", convertible(src, dst.Type))
}

// geometryToPG converts a MySQL geometry value — its SRID (4 bytes), then
// its WKB — for a PostgreSQL bytea column: the WKB.
func geometryToPG(src, dst Column, b []byte) (any, error) {
	if why := convertible(src, dst.Type); why != "" {
		return nil, fmt.Errorf("%s", why)
	}
	if len(b) < 5 {
		return nil, fmt.Errorf("%s value of %d bytes is no geometry", src.Type, len(b))
	}
	return b[4:], nil
}

// SourceForm returns, for the columns whose values a copy from engine from
// to engine to converts beyond what their kinds (Pair) compare alike — a
// MySQL bit into a PostgreSQL boolean, integer or bit string, a MySQL
// geometry into bytea — the function putting a value read from the source
// column src[i] into the form the copy writes to dst[i], so that a copied
// value compares equal to its source; nil where values compare as read.
func SourceForm(from, to plans.Engine, src, dst []Column) []func(any) (any, error) {
	if from != plans.MySQL || to != plans.Postgres {
		return nil
	}
	var out []func(any) (any, error)
	for i, c := range src {
		if c.Base != "bit" && !geometry(c.Base) {
			continue
		}
		if out == nil {
			out = make([]func(any) (any, error), len(src))
		}
		s, d := c, dst[i]
		out[i] = func(v any) (any, error) {
			if v == nil {
				return nil, nil
			}
			return fromMySQL(s, d, plans.Postgres, v)
		}
	}
	return out
}

// overridable checks a plan's type for a column mapped from engine from to
// engine to: "" when its values convert to it.
func overridable(from, to plans.Engine, c Column, typ string) string {
	if from != plans.MySQL || to != plans.Postgres {
		return ""
	}
	return convertible(c, typ)
}

// IntegerType reports whether a PostgreSQL type can be an identity's.
func IntegerType(typ string) bool {
	return slices.Contains([]string{"smallint", "integer", "bigint", "int2", "int4", "int8", "int"}, baseOf(typ))
}

// NeedsMax reports whether the mapping of c from engine from to engine to
// holds only for the values the source holds: a sequenced MySQL bigint
// unsigned becomes PostgreSQL's bigint (an identity is an integer type).
// Whoever creates the table reads the column's largest value and checks it
// (MaxFits).
func NeedsMax(from, to plans.Engine, c Column) bool {
	return from == plans.MySQL && to == plans.Postgres && c.Sequenced && c.Base == "bigint" && strings.Contains(c.Type, "unsigned")
}

// MaxFits checks the largest value max ("" for none) of a column NeedsMax
// against PostgreSQL's bigint: an error naming table.column and the plan's
// way out.
func MaxFits(table string, c Column, max string) error {
	if max == "" {
		return nil
	}
	if n, err := strconv.ParseUint(max, 10, 64); err == nil && n <= math.MaxInt64 {
		return nil
	}
	return fmt.Errorf("%w: %s.%s: %s AUTO_INCREMENT holds %s, above %d, the largest value of PostgreSQL's bigint and of an identity; name its type in the plan: types: {%s: \"numeric(20,0)\"} (then created without an identity)",
		plans.ErrInvalid, table, c.Name, c.Type, max, int64(math.MaxInt64), strconv.Quote(c.Name))
}
