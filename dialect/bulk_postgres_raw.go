package dialect

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgRawTypes are the base types whose binary form (the bytes of their send
// function, which their receive function reads back) depends on nothing of
// the database: no type OID inside it, no user type. Arrays, composites,
// ranges, enums and domains are left to the decoding path. Between two
// servers of the same major version (and datetime representation) each
// reads back what the other sends.
var pgRawTypes = map[string]bool{
	"smallint": true, "integer": true, "bigint": true, "numeric": true, "real": true, "double precision": true,
	"text": true, "character varying": true, "character": true, "boolean": true, "bytea": true, "uuid": true,
	"date": true, "timestamp without time zone": true, "timestamp with time zone": true,
	"time without time zone": true, "interval": true, "json": true, "jsonb": true,
	"inet": true, "cidr": true, "macaddr": true, "oid": true,
}

// pgRawAcross are the types of pgRawTypes whose binary form is the same in
// every major version from 10 on (given the same integer_datetimes), so
// that passthrough may copy them between servers of different versions:
// fixed-width integers and IEEE floats; a boolean's one byte; text,
// varchar and char as the client encoding's bytes (the connection's, the
// same on both sides); bytea's bytes; uuid's 16 bytes; date as int32 days
// and timestamp, timestamptz and time as int64 microseconds, their
// infinities the type's extreme values since 8.4. Left out, whatever their
// tables hold today:
//   - interval: PostgreSQL 17 sends 'infinity' as (INT64_MAX, INT32_MAX,
//     INT32_MAX), which an older server takes as the finite interval
//     "178956970 years 7 mons 2147483647 days 2562047788:00:54.775807";
//   - numeric: PostgreSQL 14 added ±Infinity (sign words 0xD000 and
//     0xF000), which an older server refuses;
//   - json, jsonb, inet, cidr, macaddr, oid: unchanged as far as we know,
//     but nothing measured shows it, and the decoding path carries them.
var pgRawAcross = map[string]bool{
	"smallint": true, "integer": true, "bigint": true, "real": true, "double precision": true, "boolean": true,
	"text": true, "character varying": true, "character": true, "bytea": true, "uuid": true,
	"date": true, "timestamp without time zone": true, "timestamp with time zone": true, "time without time zone": true,
}

// pgRawKeys are the key types ReadRaw decodes, as the database/sql reader
// gives them: integers as int64, text as string.
var pgRawKeys = map[string]bool{"smallint": true, "integer": true, "bigint": true, "text": true, "character varying": true}

// Passthrough implements RawCopier: p is the target's dialect, from the
// source's, each as Detect found its server. Two servers of one major
// version may pass any type of pgRawTypes, two of different versions only
// those of pgRawAcross; a server not detected, or whose datetimes are not
// the other's, passes nothing.
func (p Postgres) Passthrough(from Dialect, src, dst []Column, key []string) bool {
	s, ok := from.(Postgres)
	if !ok || s.Server.Major == 0 || p.Server.Major == 0 || s.Server.IntegerDatetimes != p.Server.IntegerDatetimes {
		return false
	}
	types := pgRawTypes
	if s.Server.Major != p.Server.Major {
		types = pgRawAcross
	}
	if len(src) != len(dst) || len(src) == 0 {
		return false
	}
	for i, c := range src {
		if !types[c.Base] || dst[i].Type != c.Type || dst[i].Base != c.Base {
			return false
		}
	}
	for _, k := range key {
		if c := colNamed(src, k); !pgRawKeys[c.Base] {
			return false
		}
	}
	return true
}

// binary COPY's file header (signature, flags, no extension) and trailer.
var (
	pgCopyHeader  = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	pgCopyTrailer = []byte{0xff, 0xff}
)

// ReadRaw implements RawCopier: the page's rows read in binary, each a
// tuple of binary COPY with the token as its last field.
func (Postgres) ReadRaw(ctx context.Context, db *sql.DB, query string, args []any, keyIdx []int, token int64, hint int) (RawPage, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return RawPage{}, err
	}
	defer conn.Close()
	var page RawPage
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: a binary read needs a pgx connection, not %T", ErrNotBulk, dc)
		}
		rows, err := c.Conn().Query(ctx, query, append([]any{pgx.QueryResultFormats{pgx.BinaryFormatCode}}, args...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		page, err = rawRows(rows, keyIdx, token, hint)
		return err
	})
	return page, err
}

// rawRows appends each row of rows as a binary COPY tuple.
func rawRows(rows pgx.Rows, keyIdx []int, token int64, hint int) (RawPage, error) {
	page := RawPage{Ends: make([]int, 0, hint), Keys: make([][]any, 0, hint)}
	fields := rows.FieldDescriptions()
	keys := make([]any, 0, hint*len(keyIdx))
	var tok [12]byte
	binary.BigEndian.PutUint32(tok[:4], 8)
	binary.BigEndian.PutUint64(tok[4:], uint64(token))
	for rows.Next() {
		vals := rows.RawValues()
		b := binary.BigEndian.AppendUint16(page.Data, uint16(len(vals)+1))
		for _, v := range vals {
			if v == nil {
				b = binary.BigEndian.AppendUint32(b, 0xffffffff)
				continue
			}
			b = append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
		}
		page.Data = append(b, tok[:]...)
		page.Ends = append(page.Ends, len(page.Data))
		for _, i := range keyIdx {
			k, err := rawKey(fields[i].DataTypeOID, vals[i])
			if err != nil {
				return RawPage{}, fmt.Errorf("%w: key column %s: %w", ErrNotBulk, fields[i].Name, err)
			}
			keys = append(keys, k)
		}
		page.Keys = append(page.Keys, keys[len(keys)-len(keyIdx):len(keys):len(keys)])
	}
	return page, rows.Err()
}

// rawKey decodes a key value from its binary form as the database/sql
// reader gives it.
func rawKey(oid uint32, v []byte) (any, error) {
	switch {
	case v == nil:
		return nil, errors.New("NULL")
	case oid == pgtype.Int8OID && len(v) == 8:
		return int64(binary.BigEndian.Uint64(v)), nil
	case oid == pgtype.Int4OID && len(v) == 4:
		return int64(int32(binary.BigEndian.Uint32(v))), nil
	case oid == pgtype.Int2OID && len(v) == 2:
		return int64(int16(binary.BigEndian.Uint16(v))), nil
	case oid == pgtype.TextOID || oid == pgtype.VarcharOID:
		return string(v), nil
	}
	return nil, fmt.Errorf("type OID %d has no raw key form", oid)
}

// LoadRaw implements RawCopier by COPY … FROM STDIN (FORMAT binary); a
// unique violation is ErrConflict.
func (p Postgres) LoadRaw(ctx context.Context, conn *sql.Conn, table []string, cols []Column, fence string, page RawPage) error {
	in := io.MultiReader(bytes.NewReader(pgCopyHeader), bytes.NewReader(page.Data), bytes.NewReader(pgCopyTrailer))
	return copyIn(ctx, conn, p.copyStatement(table, cols, fence)+" (FORMAT binary)", in)
}
