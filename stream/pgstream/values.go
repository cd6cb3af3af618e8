package pgstream

import (
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// valueFunc turns one pgoutput text value into the Go value the project's
// pool returns for the column when it reads the row.
type valueFunc func(text []byte) (any, error)

// The project's pool is pgx's database/sql driver (stdlib). Its queries ask
// the server for the binary form of a few intrinsic types only (stdlib's
// databaseSQLResultFormats: bool, bytea, cid, date, float4, float8, int2,
// int4, int8, oid, timestamp, timestamptz, xid) and for the text form of
// every other type, and its Rows.Next turns a column into a driver.Value by
// its type: bool, []byte, int64, float64, time.Time, []byte for json, jsonb
// and xml, and the server's text for every other type (numeric, uuid,
// arrays, enums, intervals...). valueFor reproduces that path for a text
// value: for the binary types the text is decoded and encoded again in
// binary, so that the same scan plans give the same value (a timestamptz in
// the local zone, as the binary form gives it).
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
	case pgtype.ByteaOID: // a non-null value is never a nil slice, as in binary
		text := scanAs[[]byte](m, oid, pgtype.TextFormatCode, nil)
		return func(src []byte) (any, error) {
			v, err := text(src)
			if b, _ := v.([]byte); err == nil && b == nil {
				v = []byte{}
			}
			return v, err
		}
	}
	if !binaryResult[oid] {
		return stdlibValue(m, oid, pgtype.TextFormatCode)
	}
	scan := stdlibValue(m, oid, pgtype.BinaryFormatCode)
	switch oid {
	case pgtype.TimestamptzOID:
		return finiteTime[pgtype.Timestamptz](m, oid, scan, func(d pgtype.Timestamptz) (time.Time, bool) {
			return d.Time.In(time.Local), d.Valid && d.InfinityModifier == pgtype.Finite
		})
	case pgtype.TimestampOID:
		return finiteTime[pgtype.Timestamp](m, oid, scan, func(d pgtype.Timestamp) (time.Time, bool) {
			return d.Time.UTC(), d.Valid && d.InfinityModifier == pgtype.Finite
		})
	}
	var bin func(src []byte) ([]byte, error)
	switch oid {
	case pgtype.DateOID:
		bin = toBinary[pgtype.Date](m, oid)
	case pgtype.TimestampOID:
		bin = toBinary[pgtype.Timestamp](m, oid)
	case pgtype.TimestamptzOID:
		bin = toBinary[pgtype.Timestamptz](m, oid)
	case pgtype.Float4OID:
		bin = toBinary[pgtype.Float4](m, oid)
	case pgtype.Float8OID:
		bin = toBinary[pgtype.Float8](m, oid)
	default: // cid, oid, xid
		bin = toBinary[pgtype.Uint32](m, oid)
	}
	return func(src []byte) (any, error) {
		b, err := bin(src)
		if err != nil {
			return nil, err
		}
		return scan(b)
	}
}

// finiteTime is the binary path's value of a timestamp or timestamptz
// without the detour through the binary form (the same time.Time: the
// instant in the local zone, or in UTC without a zone); an infinity takes
// the detour (scan).
func finiteTime[T any](m *pgtype.Map, oid uint32, scan valueFunc, finite func(T) (time.Time, bool)) valueFunc {
	var zero T
	plan := m.PlanScan(oid, pgtype.TextFormatCode, &zero)
	bin := toBinary[T](m, oid)
	return func(src []byte) (any, error) {
		var d T
		if err := plan.Scan(src, &d); err != nil {
			return nil, err
		}
		if t, ok := finite(d); ok {
			return t, nil
		}
		b, err := bin(src)
		if err != nil {
			return nil, err
		}
		return scan(b)
	}
}

// toBinary turns the text form of a value into its binary form, through a
// T that holds every value of the type (infinities included).
func toBinary[T any](m *pgtype.Map, oid uint32) func(src []byte) ([]byte, error) {
	var zero T
	plan := m.PlanScan(oid, pgtype.TextFormatCode, &zero)
	return func(src []byte) ([]byte, error) {
		var d T
		if err := plan.Scan(src, &d); err != nil {
			return nil, err
		}
		return m.Encode(oid, pgtype.BinaryFormatCode, d, nil)
	}
}

// binaryResult are the types stdlib reads in binary (its
// databaseSQLResultFormats).
var binaryResult = map[uint32]bool{
	pgtype.BoolOID: true, pgtype.ByteaOID: true, pgtype.CIDOID: true, pgtype.DateOID: true,
	pgtype.Float4OID: true, pgtype.Float8OID: true, pgtype.Int2OID: true, pgtype.Int4OID: true,
	pgtype.Int8OID: true, pgtype.OIDOID: true, pgtype.TimestampOID: true, pgtype.TimestamptzOID: true,
	pgtype.XIDOID: true,
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
