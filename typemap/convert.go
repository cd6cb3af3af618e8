package typemap

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/plans"
)

// Converter returns the function that turns a value read from the source
// column src[i] into the value written to the target column dst[i], or nil
// when values go across as read (PostgreSQL to PostgreSQL).
func Converter(from, to plans.Engine, src, dst []Column) func(col int, v any) (any, error) {
	if from == plans.Postgres && to == plans.Postgres {
		return nil
	}
	return func(i int, v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		if from == plans.MySQL {
			return fromMySQL(src[i], dst[i], to, v)
		}
		return pgToMySQLValue(dst[i], v)
	}
}

// fromMySQL converts a value go-sql-driver read (with dialect.Session
// RawTimes): text and dates come as bytes, unsigned bigints as uint64.
func fromMySQL(src, dst Column, to plans.Engine, v any) (any, error) {
	switch x := v.(type) {
	case []byte:
		switch {
		case to == plans.Postgres && src.Base == "bit":
			return bitToPG(src, dst, x)
		case to == plans.Postgres && geometry(src.Base):
			return geometryToPG(src, dst, x)
		}
		if MySQLBinary(src.Base) {
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

// CheckPGConstant checks a MySQL constant (a default's) for a PostgreSQL
// column of base type base, as mapped or named by a plan: a date with a
// zero year, month or day and a TIME outside PostgreSQL's range have no
// value there.
func CheckPGConstant(base, v string) error {
	switch {
	case base == "date" || strings.HasPrefix(base, "timestamp"):
		_, err := mysqlTime(v, plans.Postgres)
		return err
	case base == "time" || base == "time without time zone":
		return checkPGTime(v)
	}
	return nil
}

// CheckMySQLConstant checks a PostgreSQL constant (a default's, unquoted)
// for a MySQL column of base type base, as mapped or named by a plan:
// NaN and the infinities have no MySQL value, and a bytea constant's text
// form (\x0102) is not its bytes.
func CheckMySQLConstant(base, v string) error {
	low := strings.ToLower(v)
	special := low == "nan" || strings.HasSuffix(low, "infinity")
	switch kind := mysqlTypes[base].kind; {
	case special && (kind == Float || kind == Number || kind == Date || kind == Timestamp || kind == Time):
		return fmt.Errorf("%s has no MySQL value", v)
	case MySQLBinary(base) && strings.HasPrefix(v, `\x`):
		return fmt.Errorf("a bytea constant is not translated")
	}
	return nil
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
		if !MySQLBinary(dst.Base) {
			return string(x), nil // json/jsonb: MySQL refuses JSON from a binary string
		}
	}
	return v, nil
}
