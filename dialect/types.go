package dialect

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/plans"
)

// maxKeyBytes is the longest InnoDB index key: text and bytea key columns
// mapped to MySQL share what the key's other columns leave of it.
const maxKeyBytes = 3072

// MapColumns translates source column definitions into the target engine's
// types, for creating a missing target table (C4). overrides (column ->
// target type text, the plan's `types`) win. A type with no mapping is an
// error naming table.column and type.
func MapColumns(from, to Dialect, table string, cols []Column, key []string, overrides map[string]string) ([]Column, error) {
	share, err := keyShare(from, to, cols, key, overrides)
	if err != nil {
		return nil, err
	}
	out := make([]Column, len(cols))
	var errs []string
	for i, c := range cols {
		out[i] = c
		if t, ok := overrides[c.Name]; ok {
			out[i].Type, out[i].Base = t, baseOf(t)
			continue
		}
		var t string
		var err error
		switch {
		case from.Engine() == to.Engine() && to.Engine() == plans.MySQL && c.Base == "json":
			t = "json" // MariaDB shows JSON as longtext
		case from.Engine() == to.Engine() && to.Engine() == plans.MySQL && intWidth.MatchString(c.Type) && c.Type != "tinyint(1)":
			t = intWidth.ReplaceAllString(c.Type, "$1") // display widths are deprecated in MySQL 8
		case from.Engine() == to.Engine():
			t = c.Type
		case from.Engine() == plans.Postgres:
			t, err = pgToMySQL(c, isKey(c.Name, key), share)
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
			plans.ErrInvalid, to.Engine(), strings.Join(errs, "; "))
	}
	return out, nil
}

// keyShare is the bytes each unbounded (text, bytea) key column of a
// PostgreSQL table gets in a MySQL key: what the other key columns leave of
// maxKeyBytes, shared equally.
func keyShare(from, to Dialect, cols []Column, key []string, overrides map[string]string) (int, error) {
	if from.Engine() != plans.Postgres || to.Engine() != plans.MySQL {
		return 0, nil
	}
	budget, unbounded := maxKeyBytes, 0
	for _, c := range cols {
		if !isKey(c.Name, key) {
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

// unboundedKey is a PostgreSQL column with no length, which a MySQL key
// must give one.
func unboundedKey(c Column) bool {
	return c.Base == "text" || c.Base == "bytea" || c.Base == "character varying" && args(c.Type) == nil
}

// mysqlKeyBytes is the most bytes a MySQL type takes in an index key.
func mysqlKeyBytes(t string) int {
	a := args(t)
	n := 0
	if len(a) > 0 {
		n, _ = strconv.Atoi(a[0])
	}
	switch baseOf(t) {
	case "tinyint":
		return 1
	case "smallint":
		return 2
	case "mediumint", "date", "time":
		return 3 + 3
	case "int", "float":
		return 4
	case "decimal":
		return n/2 + 2
	case "char", "varchar":
		return 4 * n
	case "binary", "varbinary":
		return n
	}
	return 8 // bigint, double, datetime, timestamp
}

func isKey(name string, key []string) bool {
	for _, k := range key {
		if k == name {
			return true
		}
	}
	return false
}

var (
	argsRe   = regexp.MustCompile(`\(([^)]*)\)`)
	intWidth = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|bigint)\(\d+\)`)
)

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

// precision is the fractional-seconds precision of a time type, 6 when not
// given.
func precision(typ string) string {
	if a := args(typ); len(a) == 1 {
		return a[0]
	}
	return "6"
}

// pgToMySQL maps a PostgreSQL column to a MySQL type; an unbounded key
// column gets share bytes of the index key.
func pgToMySQL(c Column, key bool, share int) (string, error) {
	a := args(c.Type)
	switch c.Base {
	case "smallint":
		return "smallint", nil
	case "integer":
		return "int", nil
	case "bigint":
		return "bigint", nil
	case "numeric":
		if len(a) != 2 {
			return "", fmt.Errorf("%s has no precision and scale", c.Type)
		}
		p, _ := strconv.Atoi(a[0])
		s, _ := strconv.Atoi(a[1])
		if p > 65 || s > 30 || s < 0 {
			return "", fmt.Errorf("%s exceeds MySQL's decimal(65,30)", c.Type)
		}
		return "decimal(" + a[0] + "," + a[1] + ")", nil
	case "real":
		return "float", nil
	case "double precision":
		return "double", nil
	case "character varying", "text":
		if c.Base == "character varying" && a != nil {
			return "varchar(" + a[0] + ")", nil
		}
		if key {
			return "varchar(" + strconv.Itoa(share/4) + ")", nil
		}
		return "longtext", nil
	case "character", "bpchar":
		n := "1"
		if a != nil {
			n = a[0]
		}
		if v, _ := strconv.Atoi(n); v > 255 {
			return "varchar(" + n + ")", nil
		}
		return "char(" + n + ")", nil
	case "boolean":
		return "tinyint(1)", nil
	case "date":
		return "date", nil
	case "time without time zone":
		return "time(" + precision(c.Type) + ")", nil
	case "timestamp without time zone", "timestamp with time zone":
		return "datetime(" + precision(c.Type) + ")", nil
	case "uuid":
		return "char(36)", nil
	case "json", "jsonb":
		return "json", nil
	case "bytea":
		if key {
			return "varbinary(" + strconv.Itoa(share) + ")", nil
		}
		return "longblob", nil
	case "enum":
		return "varchar(255)", nil
	}
	return "", fmt.Errorf("%s has no mapping", c.Type)
}

// mySQLToPG maps a MySQL column to a PostgreSQL type. c.Type is MySQL's
// column_type, e.g. "int(10) unsigned", "tinyint(1)", "enum('a','b')".
func mySQLToPG(c Column) (string, error) {
	unsigned := strings.Contains(c.Type, "unsigned")
	a := args(c.Type)
	switch c.Base {
	case "tinyint":
		if !unsigned && len(a) == 1 && a[0] == "1" {
			return "boolean", nil
		}
		return "smallint", nil
	case "smallint":
		if unsigned {
			return "integer", nil
		}
		return "smallint", nil
	case "mediumint":
		return "integer", nil
	case "int", "integer":
		if unsigned {
			return "bigint", nil
		}
		return "integer", nil
	case "bigint":
		if unsigned {
			return "numeric(20,0)", nil
		}
		return "bigint", nil
	case "decimal", "numeric":
		if len(a) == 2 {
			return "numeric(" + a[0] + "," + a[1] + ")", nil
		}
		return "numeric(10,0)", nil
	case "float":
		return "real", nil
	case "double", "double precision", "real":
		return "double precision", nil
	case "char":
		return "char(" + firstOr(a, "1") + ")", nil
	case "varchar":
		return "varchar(" + firstOr(a, "255") + ")", nil
	case "tinytext", "text", "mediumtext", "longtext":
		return "text", nil
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return "bytea", nil
	case "date":
		return "date", nil
	case "time":
		return "time(" + firstOr(a, "0") + ")", nil
	case "datetime":
		return "timestamp(" + firstOr(a, "0") + ")", nil
	case "timestamp":
		return "timestamptz(" + firstOr(a, "0") + ")", nil
	case "json":
		return "jsonb", nil
	case "enum", "set":
		return "text", nil
	case "year":
		return "smallint", nil
	}
	return "", fmt.Errorf("%s has no mapping", c.Type)
}

func firstOr(a []string, def string) string {
	if len(a) > 0 && a[0] != "" {
		return a[0]
	}
	return def
}

// Converter returns the function that turns a value read from the source
// column src[i] into the value written to the target column dst[i], or nil
// when values go across as read (PostgreSQL to PostgreSQL).
func Converter(from, to Dialect, src, dst []Column) func(col int, v any) (any, error) {
	if from.Engine() == plans.Postgres && to.Engine() == plans.Postgres {
		return nil
	}
	return func(i int, v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		if from.Engine() == plans.MySQL {
			return fromMySQL(src[i], dst[i], to.Engine(), v)
		}
		return pgToMySQLValue(dst[i], v)
	}
}

// binaryBases are MySQL types whose values are bytes, not text.
var binaryBases = map[string]bool{"binary": true, "varbinary": true, "tinyblob": true, "blob": true, "mediumblob": true, "longblob": true, "bit": true}

// fromMySQL converts a value go-sql-driver read (with dialect.Session
// RawTimes): text and dates come as bytes, unsigned bigints as uint64.
func fromMySQL(src, dst Column, to plans.Engine, v any) (any, error) {
	switch x := v.(type) {
	case []byte:
		if binaryBases[src.Base] {
			return x, nil
		}
		s := string(x)
		switch {
		case to == plans.Postgres && src.Base == "time":
			return s, checkPGTime(s)
		case src.Base == "date" || src.Base == "datetime" || src.Base == "timestamp":
			return mysqlTime(s, to)
		}
		return s, nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case int64:
		if to == plans.Postgres && dst.Base == "boolean" {
			if x != 0 && x != 1 {
				return nil, fmt.Errorf("tinyint(1) value %d is not a boolean; name another type in the plan: types: {column: \"smallint\"}", x)
			}
			return x == 1, nil
		}
	}
	return v, nil
}

// mysqlTime reads a DATE, DATETIME or TIMESTAMP value as MySQL wrote it.
// A value with a zero year, month or day ("0000-00-00", "2024-02-00") has
// no PostgreSQL value: an error there; to MySQL it goes as it is.
func mysqlTime(s string, to plans.Engine) (any, error) {
	day, clock, _ := strings.Cut(s, " ")
	parts := strings.Split(day, "-")
	if len(parts) != 3 {
		return nil, fmt.Errorf("MySQL date %q is not YYYY-MM-DD", s)
	}
	if parts[0] == "0000" || parts[1] == "00" || parts[2] == "00" {
		if to == plans.MySQL {
			return s, nil
		}
		return nil, fmt.Errorf("MySQL date %q has a zero year, month or day and no PostgreSQL value; fix the source row or make the column NULL", s)
	}
	layout := "2006-01-02"
	if clock != "" {
		layout = "2006-01-02 15:04:05.999999"
	}
	t, err := time.ParseInLocation(layout, s, time.UTC)
	if err != nil {
		return nil, fmt.Errorf("MySQL date %q: %w", s, err)
	}
	if to == plans.MySQL {
		return s, nil // exactly as read
	}
	return t, nil
}

// checkPGTime refuses MySQL TIME values outside PostgreSQL's 00:00:00 to
// 24:00:00 (MySQL's TIME is an interval of up to ±838 hours).
func checkPGTime(s string) error {
	h, _, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(h)
	if !ok || err != nil || n < 0 || n > 24 || strings.HasPrefix(s, "-") {
		return fmt.Errorf("MySQL TIME %q is outside PostgreSQL's time range 00:00:00..24:00:00", s)
	}
	return nil
}

// pgToMySQLValue converts a value pgx read for a MySQL column.
func pgToMySQLValue(dst Column, v any) (any, error) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%v has no MySQL value", x)
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("%v has no MySQL value", x)
		}
	case string:
		if (dst.Base == "decimal" || dst.Base == "numeric") && (x == "NaN" || strings.HasSuffix(x, "Infinity")) {
			return nil, fmt.Errorf("numeric %s has no MySQL value", x)
		}
	case []byte:
		if !binaryBases[dst.Base] {
			return string(x), nil // json/jsonb: MySQL refuses JSON from a binary string
		}
	}
	return v, nil
}
