package dialect

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// InsertNew implements BulkInserter by COPY … FROM STDIN in PostgreSQL's
// text format, which the server parses by each column's own input
// function, as it parses the upsert's text parameters. A unique violation
// becomes ErrConflict.
func (p Postgres) InsertNew(ctx context.Context, conn *sql.Conn, table []string, cols []Column, fence string, token int64, rows [][]any) error {
	buf := buffers.Get().(*bytes.Buffer)
	defer func() { buf.Reset(); buffers.Put(buf) }()
	var b []byte
	tok := strconv.AppendInt(nil, token, 10)
	for _, row := range rows {
		b = b[:0]
		for i, v := range row {
			var ok bool
			if b, ok = pgCopyText(b, v, cols[i]); !ok {
				return fmt.Errorf("%w: column %s: a %T value", ErrNotBulk, cols[i].Name, v)
			}
			b = append(b, '\t')
		}
		b = append(append(b, tok...), '\n')
		buf.Write(b)
	}
	names := make([]string, len(cols)+1)
	for i, c := range cols {
		names[i] = c.Name
	}
	names[len(cols)] = fence
	stmt := "COPY " + p.Quote(table...) + " (" + p.quoteList(names) + ") FROM STDIN"
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: COPY needs a pgx connection, not %T", ErrNotBulk, dc)
		}
		_, err := c.Conn().PgConn().CopyFrom(ctx, buf, stmt)
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return fmt.Errorf("%w: %s", ErrConflict, pe.Message)
	}
	return err
}

// pgCopyText appends v as a field of COPY's text format for column c, or
// reports false for a value it does not know how to write.
func pgCopyText(b []byte, v any, c Column) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, `\N`...), true
	case string:
		return pgCopyEscape(b, x), true
	case []byte:
		if c.Base == "bytea" {
			return hex.AppendEncode(append(b, `\\x`...), x), true
		}
		return pgCopyEscape(b, string(x)), true // json, jsonb: text as read
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case int32:
		return strconv.AppendInt(b, int64(x), 10), true
	case int16:
		return strconv.AppendInt(b, int64(x), 10), true
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case uint64:
		return strconv.AppendUint(b, x, 10), true
	case bool:
		if x {
			return append(b, 't'), true
		}
		return append(b, 'f'), true
	case float64:
		return pgFloat(b, x, 64), true
	case float32:
		return pgFloat(b, float64(x), 32), true
	case time.Time:
		if y := x.Year(); y < 1 || y > 9999 {
			return b, false
		}
		switch c.Base {
		case "date":
			return appendDateTime(b, x, false, false), true
		case "timestamp without time zone":
			return appendDateTime(b, x, true, false), true
		case "timestamp with time zone":
			return appendDateTime(b, x, true, true), true
		}
	}
	return b, false
}

// pgFloat writes a float as PostgreSQL reads it back exactly.
func pgFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// pgCopyEscape appends s with the backslash escapes of COPY's text format.
func pgCopyEscape(b []byte, s string) []byte { return appendEscaped(b, s, "\\\n\r\t", "\\nrt") }
