package dialect

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// loads names the reader of each LOAD DATA.
var loads atomic.Int64

// Encode implements BulkInserter: LOAD DATA's default text format.
func (MySQL) Encode(buf *bytes.Buffer, cols []Column, token int64, rows [][]any) error {
	return encodeRows(buf, cols, token, rows, myLoadText)
}

// Load implements BulkInserter by LOAD DATA LOCAL INFILE from a reader
// registered with the driver. LOCAL makes MySQL skip a duplicate key and
// coerce a bad value with a warning instead of failing, so the rows
// affected and the warnings are checked: fewer rows than given is
// ErrConflict, any warning ErrNotBulk (the upsert will then fail or
// succeed on its own, strictly). A server that refuses LOCAL (MySQL 8's
// default local_infile=OFF) is ErrNotBulk too.
func (m MySQL) Load(ctx context.Context, conn *sql.Conn, table []string, cols []Column, fence string, data []byte, rows int) error {
	name := "migrate-" + strconv.FormatInt(loads.Add(1), 10)
	mysql.RegisterReaderHandler(name, func() io.Reader { return bytes.NewReader(data) })
	defer mysql.DeregisterReaderHandler(name)
	res, err := conn.ExecContext(ctx, m.loadStatement(name, table, cols, fence))
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1148 || me.Number == 3948 || me.Number == 2068) {
		return fmt.Errorf("%w: %s", ErrNotBulk, me.Message)
	}
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n < int64(rows) {
		return fmt.Errorf("%w: %d of %d rows were skipped as duplicates", ErrConflict, int64(rows)-n, rows)
	}
	var warnings int64
	if err := conn.QueryRowContext(ctx, "SELECT @@warning_count").Scan(&warnings); err != nil {
		return err
	}
	if warnings > 0 {
		return fmt.Errorf("%w: LOAD DATA raised %d warnings (a value MySQL would have coerced)", ErrNotBulk, warnings)
	}
	return nil
}

// loadStatement is Load's LOAD DATA of cols and the fence column into
// table, from the reader registered as name.
func (m MySQL) loadStatement(name string, table []string, cols []Column, fence string) string {
	return "LOAD DATA LOCAL INFILE 'Reader::" + name + "' INTO TABLE " + m.Quote(table...) +
		` CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\t' ESCAPED BY '\\' LINES TERMINATED BY '\n' (` + m.quoteList(bulkNames(cols, fence)) + ")"
}

// myLoadText appends v as a field of LOAD DATA's default format for column
// c, or reports false for a value it does not know how to write.
func myLoadText(b []byte, v any, c Column) ([]byte, bool) {
	if out, ok := appendInteger(b, v); ok {
		return out, true
	}
	switch x := v.(type) {
	case nil:
		return append(b, `\N`...), true
	case string:
		return myLoadEscape(b, x), true
	case []byte:
		return myLoadEscape(b, string(x)), true
	case bool:
		if x {
			return append(b, '1'), true
		}
		return append(b, '0'), true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return b, false
		}
		return strconv.AppendFloat(b, x, 'g', -1, 64), true
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return b, false
		}
		// The double's text, as the upsert sends it: MySQL parses the
		// text as a double, then rounds that to a FLOAT, which from the
		// float32's own shortest text can give its neighbour.
		return strconv.AppendFloat(b, float64(x), 'g', -1, 64), true
	case time.Time:
		x = x.UTC()
		if y := x.Year(); y < 1 || y > 9999 {
			return b, false
		}
		switch c.Base {
		case "date":
			return appendDateTime(b, x, false, false), true
		case "datetime", "timestamp":
			return appendDateTime(b, x, true, false), true
		}
	}
	return b, false
}

// myLoadEscape appends s with the escapes of LOAD DATA's default format.
func myLoadEscape(b []byte, s string) []byte { return appendEscaped(b, s, "\\\n\t\x00", "\\nt0") }
