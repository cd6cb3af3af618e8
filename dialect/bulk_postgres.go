package dialect

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Encode implements BulkInserter: COPY's text format, which the server
// parses by each column's own input function, as it parses the upsert's
// text parameters.
func (Postgres) Encode(buf *bytes.Buffer, cols []Column, token int64, rows [][]any) error {
	return encodeRows(buf, cols, token, rows, pgCopyText)
}

// Load implements BulkInserter by COPY … FROM STDIN; a unique violation
// is ErrConflict.
func (p Postgres) Load(ctx context.Context, conn *sql.Conn, table []string, cols []Column, fence string, data []byte, n int) error {
	return copyIn(ctx, conn, p.copyStatement(table, cols, fence), bytes.NewReader(data))
}

// copyIn runs stmt, a COPY … FROM STDIN, on conn with in as its data; a
// unique violation is ErrConflict.
func copyIn(ctx context.Context, conn *sql.Conn, stmt string, in io.Reader) error {
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: COPY needs a pgx connection, not %T", ErrNotBulk, dc)
		}
		_, err := c.Conn().PgConn().CopyFrom(ctx, in, stmt)
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return fmt.Errorf("%w: %s", ErrConflict, pe.Message)
	}
	return err
}

// copyStatement is Load's COPY of cols and the fence column into table.
func (p Postgres) copyStatement(table []string, cols []Column, fence string) string {
	return "COPY " + p.Quote(table...) + " (" + p.quoteList(bulkNames(cols, fence)) + ") FROM STDIN"
}

// pgCopyText appends v as a field of COPY's text format for column c, or
// reports false for a value it does not know how to write.
func pgCopyText(b []byte, v any, c Column) ([]byte, bool) {
	if out, ok := appendInteger(b, v); ok {
		return out, true
	}
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
		// The catalog's names ("timestamp with time zone"), or a mapped
		// column's ("timestamptz", "timestamp").
		switch base := c.Base; {
		case base == "date":
			return appendDateTime(b, x, false, false), true
		case strings.HasPrefix(base, "timestamptz") || strings.HasSuffix(base, "with time zone") && strings.HasPrefix(base, "timestamp"):
			return appendDateTime(b, x, true, true), true
		case strings.HasPrefix(base, "timestamp"):
			return appendDateTime(b, x, true, false), true
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
