package pgstream

import (
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgtype"
)

// valueFunc turns one pgoutput text value into the Go value the project's
// pool returns for the column when it reads the row.
type valueFunc func(text []byte) (any, error)

// The project's pool is pgx's database/sql driver (stdlib): pgx asks the
// server for each result column in the format its type map prefers
// (binary for the types it knows, text for the others), and stdlib's
// Rows.Next turns the column into a driver.Value by its type: bool, []byte,
// int64, float64, time.Time, []byte for json, jsonb and xml, and a string
// for every other type (pgx's text form of the binary value). valueFor
// reproduces that path for a text value: when the pool would have read the
// binary form, the text is decoded and encoded again in binary first, so
// that the same scan plans give the same value (a timestamptz in the local
// zone, an interval or a numeric written by pgx and not by the server).
func valueFor(m *pgtype.Map, oid uint32) valueFunc {
	// Fast paths whose result is the binary path's, without the detour.
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		return func(src []byte) (any, error) { return strconv.ParseInt(string(src), 10, 64) }
	case pgtype.BoolOID:
		return func(src []byte) (any, error) {
			switch string(src) {
			case "t":
				return true, nil
			case "f":
				return false, nil
			}
			return nil, fmt.Errorf("invalid bool %q", src)
		}
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID:
		return func(src []byte) (any, error) { return string(src), nil }
	}

	format := m.FormatCodeForOID(oid)
	scan := stdlibValue(m, oid, format)
	if format == pgtype.TextFormatCode {
		return scan
	}
	typ, _ := m.TypeForOID(oid) // known: the format is binary
	return func(src []byte) (any, error) {
		v, err := typ.Codec.DecodeValue(m, oid, pgtype.TextFormatCode, src)
		if err != nil {
			return nil, err
		}
		bin, err := m.Encode(oid, pgtype.BinaryFormatCode, v, nil)
		if err != nil {
			return nil, err
		}
		return scan(bin)
	}
}

// stdlibValue is stdlib's conversion of a column of type oid received in
// format (pgx v5 stdlib Rows.initValueFuncs), one value per call.
func stdlibValue(m *pgtype.Map, oid uint32, format int16) valueFunc {
	switch oid {
	case pgtype.BoolOID:
		return scanAs[bool](m, oid, format, nil)
	case pgtype.ByteaOID, pgtype.JSONOID, pgtype.JSONBOID, pgtype.XMLOID:
		return scanAs[[]byte](m, oid, format, nil)
	case pgtype.CIDOID, pgtype.OIDOID, pgtype.XIDOID:
		return scanAs(m, oid, format, func(d pgtype.Uint32) (any, error) { return d.Value() })
	case pgtype.DateOID:
		return scanAs(m, oid, format, func(d pgtype.Date) (any, error) { return d.Value() })
	case pgtype.Float4OID:
		return scanAs(m, oid, format, func(d float32) (any, error) { return float64(d), nil })
	case pgtype.Float8OID:
		return scanAs[float64](m, oid, format, nil)
	case pgtype.Int2OID:
		return scanAs(m, oid, format, func(d int16) (any, error) { return int64(d), nil })
	case pgtype.Int4OID:
		return scanAs(m, oid, format, func(d int32) (any, error) { return int64(d), nil })
	case pgtype.Int8OID:
		return scanAs[int64](m, oid, format, nil)
	case pgtype.TimestampOID:
		return scanAs(m, oid, format, func(d pgtype.Timestamp) (any, error) { return d.Value() })
	case pgtype.TimestamptzOID:
		return scanAs(m, oid, format, func(d pgtype.Timestamptz) (any, error) { return d.Value() })
	}
	return scanAs[string](m, oid, format, nil)
}

// scanAs scans a value into a T with the map's plan and converts it with
// conv (the T itself when conv is nil).
func scanAs[T any](m *pgtype.Map, oid uint32, format int16, conv func(T) (any, error)) valueFunc {
	var zero T
	plan := m.PlanScan(oid, format, &zero)
	return func(src []byte) (any, error) {
		var d T
		if err := plan.Scan(src, &d); err != nil {
			return nil, err
		}
		if conv != nil {
			return conv(d)
		}
		return d, nil
	}
}
