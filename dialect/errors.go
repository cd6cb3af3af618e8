package dialect

import (
	"context"
	"database/sql/driver"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-dev/migrate/internal/retry"
)

// Class is what an error from a database says about retrying.
type Class int

const (
	// Other errors may pass (a deadlock, a lock or statement timeout):
	// retried a few times (max_retries), then the shard halts.
	Other Class = iota
	// Unavailable: the server cannot be reached or is going down or
	// starting up (refused or reset connections, shutdown, too many
	// connections). Retried for as long as an outage may last.
	Unavailable
	// Data: the server refused a value or a row (too long, out of range,
	// NULL, a constraint); the same rows fail the same way every time.
	Data
)

func (c Class) String() string {
	return [...]string{"other", "unavailable", "data"}[c]
}

// mysqlUnavailable are MySQL/MariaDB server errors of a server that is
// going away or full: too many connections (1040), shutdown in progress
// (1053), connection killed (1927, MariaDB), server shutdown (1077,
// 1078), aborted connection (1152), got an error reading (1158-1161).
var mysqlUnavailable = map[uint16]bool{1040: true, 1053: true, 1077: true, 1078: true, 1152: true, 1158: true, 1159: true, 1160: true, 1161: true, 1927: true}

// mysqlData are MySQL/MariaDB errors about a value or row: data too long
// (1406), out of range (1264), incorrect value (1366, 1292, 1367), column
// cannot be null (1048), cannot add or update a child row (1452), check
// constraint (3819 MySQL, 4025 MariaDB), truncated (1265), invalid
// character string (1300), division by zero (1365).
var mysqlData = map[uint16]bool{1406: true, 1264: true, 1366: true, 1292: true, 1367: true, 1048: true, 1452: true, 3819: true, 4025: true, 1265: true, 1300: true, 1365: true}

// Classify tells what err, from either engine's driver or the network,
// says about retrying. Context cancellations are Other.
func Classify(err error) Class {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Other
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // admin/crash shutdown, cannot connect now
			pe.Code == "25P03", pe.Code == "57P05", // session ended by idle(-in-transaction) timeout: a new one works
			pe.Code == "53300": // too many connections
			return Unavailable
		case strings.HasPrefix(pe.Code, "22"), // data exception
			pe.Code == "23502", pe.Code == "23503", pe.Code == "23514": // not null, foreign key, check
			return Data
		}
		return Other
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch {
		case mysqlUnavailable[me.Number]:
			return Unavailable
		case mysqlData[me.Number]:
			return Data
		}
		return Other
	}
	// A failed connect (pgconn.ConnectError) is classified by its cause:
	// the network's errors below; TLS and certificate errors are Other.
	if retry.Network(err) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) {
		return Unavailable
	}
	msg := err.Error()
	for _, s := range []string{"conn closed", "connection refused", "connection reset", "broken pipe", "bad connection", "server closed the connection", "unexpected EOF", "database system is shutting down", "database system is starting up"} {
		if strings.Contains(msg, s) {
			return Unavailable
		}
	}
	return Other
}

// LockTimeout reports whether err is a lock wait that timed out (MySQL
// 1205; PostgreSQL's lock_timeout, 55P03): another session holds the row,
// such as a frozen holder's transaction that its server-side bounds have
// not ended yet. Waiting longer may pass.
func LockTimeout(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "55P03"
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}

// MissingTable reports whether err says a table does not exist
// (PostgreSQL 42P01, MySQL 1146): a helper table a newer version added
// and an older one's target does not have yet.
func MissingTable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "42P01"
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1146
}

var (
	mysqlColumn = regexp.MustCompile(`(?i)\bcolumn '((?:[^']|'')+)'`)
	pgCopyWhere = regexp.MustCompile(`\bcolumn ((?:"(?:[^"]|"")+")|[^\s:]+)`)
)

// ErrorColumn is the column a Data error names, when the driver tells:
// PostgreSQL's column_name field or the column of a COPY's context,
// MySQL's "… for column 'c' …". "" when it does not.
func ErrorColumn(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if pe.ColumnName != "" {
			return pe.ColumnName
		}
		if m := pgCopyWhere.FindStringSubmatch(pe.Where); m != nil {
			c := m[1]
			if strings.HasPrefix(c, `"`) {
				c = strings.ReplaceAll(c[1:len(c)-1], `""`, `"`)
			}
			return c
		}
		return ""
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		if m := mysqlColumn.FindStringSubmatch(me.Message); m != nil {
			return strings.ReplaceAll(m[1], "''", "'")
		}
	}
	return ""
}

// WhileUnavailable runs fn again, with backoff, while it fails because a
// database or lock service dropped or reset the connection (Unavailable
// but not refused: a wrong address is not worth waiting for), for up to
// maxOutage; each retry is logged with msg.
func WhileUnavailable(ctx context.Context, maxOutage time.Duration, log *slog.Logger, msg string, fn func() error) error {
	kind := func(err error) retry.Kind {
		if ctx.Err() == nil && Classify(err) == Unavailable && !errors.Is(err, syscall.ECONNREFUSED) {
			return retry.Outage
		}
		return retry.Final
	}
	err := retry.Do(ctx, &retry.Budget{MaxOutage: maxOutage}, fn, kind, func(err error, _ retry.Kind, attempt int, wait time.Duration) {
		log.Warn(msg, "err", err, "attempt", attempt, "backoff", wait)
	})
	if ex := (*retry.Exhausted)(nil); errors.As(err, &ex) {
		return ex.Err
	}
	return err
}
