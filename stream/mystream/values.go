package mystream

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// kind is how a column's binlog value becomes the driver's value.
type kind byte

const (
	kBytes    kind = iota // text, blobs, JSON, geometry: []byte as sent
	kChar                 // CHAR: []byte, trailing spaces removed as the server does on read
	kBinary               // BINARY(n): []byte padded with 0x00 to n bytes
	kInt                  // every integer type: int64 (uint64 past MaxInt64 as decimal []byte)
	kYear                 // int64
	kFloat                // float32
	kDouble               // float64
	kDecimal              // []byte, the decimal's text
	kDate                 // time.Time, UTC
	kDatetime             // DATETIME, TIMESTAMP: time.Time, UTC
	kTime                 // []byte "[-]HH:MM:SS[.fff]" with the column's digits
	kBit                  // []byte, big-endian, (M+7)/8 bytes
	kEnum                 // []byte, the member's name
	kSet                  // []byte, the members' names joined by commas
)

// column is what converting a column's binlog values takes.
type column struct {
	name     string
	kind     kind
	unsigned bool
	bits     uint     // kInt: the type's width
	fsp      int      // kTime, kDatetime: fractional digits
	size     int      // kBinary: bytes; kBit: bytes
	members  []string // kEnum, kSet
}

// table is a source table's columns, from information_schema.
type table struct {
	schema, name string
	want         bool // a table of the capture's list
	cols         []column
	names        []string
}

// loadTable reads a table's columns, in their order, from
// information_schema.COLUMNS (the binlog's table map carries types, and
// names only with binlog_row_metadata=FULL; signedness and ENUM/SET
// members only with FULL either).
func loadTable(ctx context.Context, db *sql.DB, schema, name string) (*table, error) {
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE,
		COALESCE(DATETIME_PRECISION, 0), COALESCE(CHARACTER_OCTET_LENGTH, 0), COALESCE(NUMERIC_PRECISION, 0)
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, schema, name)
	if err != nil {
		return nil, fmt.Errorf("mystream: the columns of %s.%s: %w", schema, name, err)
	}
	defer func() { _ = rows.Close() }()
	t := &table{schema: schema, name: name, want: true}
	for rows.Next() {
		var colName, dataType, colType string
		var fsp, octets, prec int64
		if err := rows.Scan(&colName, &dataType, &colType, &fsp, &octets, &prec); err != nil {
			return nil, fmt.Errorf("mystream: the columns of %s.%s: %w", schema, name, err)
		}
		col, err := columnOf(colName, dataType, colType, fsp, octets, prec)
		if err != nil {
			return nil, fmt.Errorf("mystream: %s.%s: %w", schema, name, err)
		}
		t.cols = append(t.cols, col)
		t.names = append(t.names, colName)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mystream: the columns of %s.%s: %w", schema, name, err)
	}
	if len(t.cols) == 0 {
		return nil, fmt.Errorf("mystream: table %s.%s has no columns the capture's user can see (it was dropped, or the user lacks SELECT on it)", schema, name)
	}
	return t, nil
}

// columnOf is a column's conversion from its information_schema row.
func columnOf(name, dataType, colType string, fsp, octets, prec int64) (column, error) {
	c := column{name: name, unsigned: strings.Contains(strings.ToLower(colType), "unsigned")}
	switch strings.ToLower(dataType) {
	case "tinyint":
		c.kind, c.bits = kInt, 8
	case "smallint":
		c.kind, c.bits = kInt, 16
	case "mediumint":
		c.kind, c.bits = kInt, 24
	case "int", "integer":
		c.kind, c.bits = kInt, 32
	case "bigint":
		c.kind, c.bits = kInt, 64
	case "year":
		c.kind = kYear
	case "float":
		c.kind = kFloat
	case "double", "real", "double precision":
		c.kind = kDouble
	case "decimal", "numeric":
		c.kind = kDecimal
	case "date":
		c.kind = kDate
	case "datetime", "timestamp":
		c.kind, c.fsp = kDatetime, int(fsp)
	case "time":
		c.kind, c.fsp = kTime, int(fsp)
	case "bit":
		c.kind, c.size = kBit, int(prec+7)/8
	case "char":
		c.kind = kChar
	case "binary":
		c.kind, c.size = kBinary, int(octets)
	case "enum", "set":
		c.kind = kEnum
		if strings.EqualFold(dataType, "set") {
			c.kind = kSet
		}
		m, err := members(colType)
		if err != nil {
			return column{}, fmt.Errorf("column %s: %w", name, err)
		}
		c.members = m
	default:
		c.kind = kBytes
	}
	return c, nil
}

// members are the names of an ENUM or SET's members, from its COLUMN_TYPE
// ("enum('a','b”c')"), in their order.
func members(colType string) ([]string, error) {
	open := strings.IndexByte(colType, '(')
	if open < 0 || !strings.HasSuffix(colType, ")") {
		return nil, fmt.Errorf("unexpected type %q", colType)
	}
	s := colType[open+1 : len(colType)-1]
	var out []string
	for len(s) > 0 {
		if s[0] != '\'' {
			return nil, fmt.Errorf("unexpected type %q", colType)
		}
		var b strings.Builder
		i := 1
		for ; i < len(s); i++ {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, fmt.Errorf("unexpected type %q", colType)
		}
		out = append(out, b.String())
		s = strings.TrimPrefix(s[i+1:], ",")
	}
	return out, nil
}

// convert turns a value go-mysql decoded from the binlog into the value
// go-sql-driver returns for the same column when the project's pool reads
// the row (binary protocol, parseTime, UTC).
func (c *column) convert(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch c.kind {
	case kInt:
		n, ok := toInt64(v)
		if !ok {
			break
		}
		if !c.unsigned {
			return n, nil
		}
		u := uint64(n)
		if c.bits < 64 {
			u &= 1<<c.bits - 1
		}
		if u > math.MaxInt64 {
			return []byte(strconv.FormatUint(u, 10)), nil
		}
		return int64(u), nil
	case kYear:
		if n, ok := toInt64(v); ok {
			return n, nil
		}
	case kFloat:
		if f, ok := v.(float32); ok {
			return f, nil
		}
	case kDouble:
		if f, ok := v.(float64); ok {
			return f, nil
		}
	case kDate, kDatetime:
		return toTime(v)
	case kTime:
		if s, ok := v.(string); ok {
			return formatTime(s, c.fsp)
		}
	case kBit:
		if n, ok := toInt64(v); ok {
			b := make([]byte, 8)
			binary.BigEndian.PutUint64(b, uint64(n))
			return b[8-c.size:], nil
		}
	case kEnum:
		if n, ok := toInt64(v); ok {
			if n == 0 {
				return []byte{}, nil // the error value ''
			}
			if n < 0 || int(n) > len(c.members) {
				return nil, fmt.Errorf("column %s: ENUM index %d out of its %d members (the table changed: reopen after the DDL)", c.name, n, len(c.members))
			}
			return []byte(c.members[n-1]), nil
		}
	case kSet:
		if n, ok := toInt64(v); ok {
			var names []string
			for i, m := range c.members {
				if uint64(n)&(1<<uint(i)) != 0 {
					names = append(names, m)
				}
			}
			return []byte(strings.Join(names, ",")), nil
		}
	case kChar:
		if b, ok := toBytes(v); ok {
			return []byte(strings.TrimRight(string(b), " ")), nil
		}
	case kBinary:
		if b, ok := toBytes(v); ok {
			out := make([]byte, max(c.size, len(b)))
			copy(out, b)
			return out, nil
		}
	case kDecimal, kBytes:
		if b, ok := toBytes(v); ok {
			return append([]byte{}, b...), nil
		}
	}
	return nil, fmt.Errorf("column %s: unexpected binlog value of type %T (the table's definition differs from the binlog's: reopen after the DDL)", c.name, v)
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), true //nolint:gosec // reinterpreted as unsigned by the caller
	}
	return 0, false
}

// toBytes is a string or []byte value's bytes (go-mysql's strings share
// the event's buffer: callers copy).
func toBytes(v any) ([]byte, bool) {
	switch s := v.(type) {
	case string:
		return []byte(s), true
	case []byte:
		return s, true
	}
	return nil, false
}

// toTime is a DATE, DATETIME or TIMESTAMP value as the driver scans it:
// time.Time in UTC; a zero date is time.Time{}.
func toTime(v any) (any, error) {
	switch t := v.(type) {
	case time.Time:
		return t.UTC(), nil
	case string:
		return parseDateTime(t)
	}
	return nil, fmt.Errorf("unexpected temporal value of type %T", v)
}

// parseDateTime parses "YYYY-MM-DD[ HH:MM:SS[.ffffff]]" the way the driver
// builds a time from the server's fields (time.Date normalises a zero
// month or day; all zero is time.Time{}).
func parseDateTime(s string) (any, error) {
	var y, mo, d, h, mi, sec, ns int
	date, clock, _ := strings.Cut(s, " ")
	if _, err := fmt.Sscanf(date, "%d-%d-%d", &y, &mo, &d); err != nil {
		return nil, fmt.Errorf("unexpected date %q", s)
	}
	if clock != "" {
		whole, frac, _ := strings.Cut(clock, ".")
		if _, err := fmt.Sscanf(whole, "%d:%d:%d", &h, &mi, &sec); err != nil {
			return nil, fmt.Errorf("unexpected time %q", s)
		}
		if frac != "" {
			f, err := strconv.Atoi((frac + "000000000")[:9])
			if err != nil {
				return nil, fmt.Errorf("unexpected time %q", s)
			}
			ns = f
		}
	}
	if y == 0 && mo == 0 && d == 0 && h == 0 && mi == 0 && sec == 0 && ns == 0 {
		return time.Time{}, nil
	}
	return time.Date(y, time.Month(mo), d, h, mi, sec, ns, time.UTC), nil
}

// formatTime writes a TIME value as the driver does: two-digit hours below
// 100, and exactly fsp fractional digits.
func formatTime(s string, fsp int) ([]byte, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	parts := strings.Split(whole, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("unexpected TIME %q", s)
	}
	h, err1 := strconv.Atoi(parts[0])
	m, err2 := strconv.Atoi(parts[1])
	sec, err3 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, fmt.Errorf("unexpected TIME %q", s)
	}
	out := make([]byte, 0, 16)
	if neg {
		out = append(out, '-')
	}
	if h < 100 {
		out = fmt.Appendf(out, "%02d", h)
	} else {
		out = strconv.AppendInt(out, int64(h), 10)
	}
	out = fmt.Appendf(out, ":%02d:%02d", m, sec)
	if fsp > 0 {
		out = append(out, '.')
		out = append(out, (frac + "000000")[:fsp]...)
	}
	return out, nil
}

// rawTime is a DATE, DATETIME or TIMESTAMP value as the driver returns it
// without parseTime (dialect.Session.RawTimes, how migrate reads a MySQL
// source): the text, with the column's fractional digits; a zero or
// partly zero date as the server wrote it.
func (c *column) rawTime(v any) ([]byte, error) {
	var s string
	switch t := v.(type) {
	case time.Time:
		s = t.UTC().Format("2006-01-02 15:04:05.000000000")
	case string:
		s = t
	default:
		return nil, fmt.Errorf("unexpected temporal value of type %T", v)
	}
	date, clock, _ := strings.Cut(s, " ")
	if c.kind == kDate {
		return []byte(date), nil
	}
	if clock == "" {
		clock = "00:00:00"
	}
	whole, frac, _ := strings.Cut(clock, ".")
	out := date + " " + whole
	if c.fsp > 0 {
		out += "." + (frac + "000000000")[:c.fsp]
	}
	return []byte(out), nil
}
