package dialect

import (
	"context"
	"crypto/tls"
	"database/sql"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/migrate-dev/migrate/internal/tlsca"
	"github.com/migrate-dev/migrate/plans"
)

// MySQL is the dialect of MySQL 8+ and MariaDB 10.11+. Detect picks the
// upsert syntax: MariaDB and MySQL before 8.0.19 read the incoming row with
// VALUES(col); MySQL 8.0.19+ names it with a row alias (VALUES() is
// deprecated there). Collation is the binary NO PAD one of each server.
type MySQL struct {
	RowAlias bool   // INSERT … AS new ON DUPLICATE KEY UPDATE c = new.c
	MariaDB  bool   // MariaDB: JSON columns are longtext with a json_valid check
	Version  string // the server's VERSION()
	floats   *floatCols
}

// Engine implements Dialect.
func (MySQL) Engine() plans.Engine { return plans.MySQL }

// Open implements Dialect. Sessions read and write times in UTC, run in
// strict mode, and carry the F3 timeouts as session variables set on
// connect. (Lease transactions ask for READ COMMITTED when they begin.)
func (MySQL) Open(dsn plans.DSN, s Session) (*sql.DB, error) {
	cfg, err := mysqlOpenConfig(dsn, s)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql DSN %s: invalid", dsn)
	}
	return sql.OpenDB(conn), nil
}

// mysqlOpenConfig is the driver config of Open's connections to dsn, with
// the session s.
func mysqlOpenConfig(dsn plans.DSN, s Session) (*mysql.Config, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ParseTime = !s.RawTimes
	cfg.Loc = time.UTC
	// An ON DUPLICATE KEY UPDATE that changed nothing must report no
	// affected row: the strict fence claim depends on it.
	cfg.ClientFoundRows = false
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	// NO_AUTO_VALUE_ON_ZERO: a copied row whose AUTO_INCREMENT key is 0
	// keeps 0 instead of taking a new value.
	cfg.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO'"
	idle := max(int64(s.IdleInTransaction/time.Second), 1)
	if s.IdleInTransaction > 0 {
		cfg.Params["wait_timeout"] = strconv.FormatInt(idle, 10)
	}
	if s.Lock > 0 {
		// A lock waiter outwaits a silent holder's session by a second
		// (MySQL counts both in whole seconds).
		lock := max(int64((s.Lock+time.Second-1)/time.Second), idle+1)
		cfg.Params["innodb_lock_wait_timeout"] = strconv.FormatInt(lock, 10)
	}
	if s.Statement > 0 {
		// A client that stops sending or reading in the middle of a
		// statement (LOAD DATA LOCAL INFILE) is waited for no longer than
		// a statement may run.
		net := strconv.FormatInt(max(int64(s.Statement/time.Second), 1), 10)
		cfg.Params["net_read_timeout"], cfg.Params["net_write_timeout"] = net, net
	}
	cfg.Collation = "utf8mb4_general_ci" // the connection's; columns keep their own
	// Room for a verification chunk's rows in one GROUP_CONCAT (it is cut
	// at max_allowed_packet all the same, which Checksum detects).
	cfg.Params["group_concat_max_len"] = "1073741824"
	return cfg, nil
}

// mysqlConfig turns a mysql:// URL or a native DSN into a driver config.
// Besides the driver's parameters (tls=true verifies the server against the
// system's roots) it takes tls-ca=/path/ca.pem: TLS verified against that
// CA file (see useTLSCA).
func mysqlConfig(dsn plans.DSN) (*mysql.Config, error) {
	var cfg *mysql.Config
	if dsn.Native() {
		c, err := mysql.ParseDSN(dsn.Secret())
		if err != nil {
			return nil, fmt.Errorf("mysql DSN %s: invalid", dsn) // the driver's text may quote the input
		}
		cfg = c
	} else {
		// The URL's query holds driver parameters (tls=…, timeout=…): let
		// the driver parse them, then set who and where from the URL.
		c, err := mysql.ParseDSN("/?" + dsn.Query().Encode())
		if err != nil {
			return nil, fmt.Errorf("mysql DSN %s: invalid parameters", dsn)
		}
		cfg = c
		cfg.User, cfg.Passwd, cfg.DBName = dsn.User(), dsn.Password(), dsn.Database()
		port := dsn.Port()
		if port == "" {
			port = "3306"
		}
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(dsn.Host(), port)
		// ParseDSN named the TLS server after its default address
		// (127.0.0.1): the certificate must be checked against the URL's host.
		if cfg.TLS != nil && !cfg.TLS.InsecureSkipVerify {
			cfg.TLS.ServerName = dsn.Host()
		}
	}
	if err := useTLSCA(cfg, dsn); err != nil {
		return nil, err
	}
	return cfg, nil
}

// tlsCAParam names the DSN parameter of a CA file; it is ours, never sent
// to the server as a session variable.
const tlsCAParam = "tls-ca"

// useTLSCA takes tls-ca=FILE out of cfg's parameters, if there, and makes
// the connection TLS (1.2 or later) with the server's certificate verified
// against the PEM certificates in FILE for the DSN's host name. It goes
// with no tls parameter or tls=true; any other tls value is an error.
func useTLSCA(cfg *mysql.Config, dsn plans.DSN) error {
	path, ok := cfg.Params[tlsCAParam]
	if !ok {
		return nil
	}
	delete(cfg.Params, tlsCAParam)
	if err := tlsca.CheckPath(tlsCAParam, path); err != nil {
		return fmt.Errorf("mysql DSN %s: %w", dsn, err)
	}
	switch cfg.TLSConfig {
	case "", "true":
	default:
		return fmt.Errorf("mysql DSN %s: %s goes with tls=true or no tls parameter", dsn, tlsCAParam)
	}
	var host string
	switch cfg.Net {
	case "tcp", "tcp4", "tcp6":
		h, _, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			h = cfg.Addr
		}
		host = h
	default:
		return fmt.Errorf("mysql DSN %s: %s needs a TCP address (the certificate is checked against the host name)", dsn, tlsCAParam)
	}
	roots, err := tlsca.Load(tlsCAParam, path)
	if err != nil {
		return fmt.Errorf("mysql DSN %s: %w", dsn, err)
	}
	cfg.TLSConfig = ""
	cfg.TLS = &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12}
	return nil
}

// Detect implements Detector from VERSION().
func (MySQL) Detect(ctx context.Context, db *sql.DB) (Dialect, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return nil, err
	}
	return mysqlFor(v), nil
}

// mysqlFor is the dialect of a server version string.
func mysqlFor(version string) MySQL {
	m := MySQL{Version: version, MariaDB: strings.Contains(strings.ToLower(version), "mariadb")}
	m.RowAlias = !m.MariaDB && versionAtLeast(version, 8, 0, 19)
	return m
}

func versionAtLeast(v string, want ...int) bool {
	parts := strings.SplitN(strings.SplitN(v, "-", 2)[0], ".", 3)
	for i, w := range want {
		if i >= len(parts) {
			return false
		}
		n, _ := strconv.Atoi(parts[i])
		if n != w {
			return n > w
		}
	}
	return true
}

// Quote implements Dialect: backticks, a backtick inside doubled.
func (MySQL) Quote(ident ...string) string {
	q := make([]string, len(ident))
	for i, s := range ident {
		q[i] = "`" + strings.ReplaceAll(s, "`", "``") + "`"
	}
	return strings.Join(q, ".")
}

func (m MySQL) quoteList(cols []string) string { return quoteList(m, cols) }

// BoundTx implements Dialect. MySQL has no transaction-local timeouts, so
// the session's are set for the transaction: wait_timeout closes the
// connection of a holder that goes silent between statements (rolling its
// transaction back), net_read_timeout and net_write_timeout end a statement
// whose client stops sending or reading in its middle (a holder frozen
// inside LOAD DATA LOCAL INFILE keeps its locks for as long as the server
// waits for the file's next bytes), innodb_lock_wait_timeout bounds a lock
// wait; all in whole seconds, rounded down. The session's own values are
// kept in user variables first (once: a second BoundTx before UnboundTx
// keeps the first saved values) for UnboundTx to restore.
func (MySQL) BoundTx(remaining time.Duration) (string, []any) {
	s := max(int64(remaining/time.Second), 1)
	var b strings.Builder
	b.WriteString("SET ")
	for _, v := range boundVars {
		fmt.Fprintf(&b, "@migrate_%s = COALESCE(@migrate_%s, @@SESSION.%s), ", v, v, v)
	}
	args := make([]any, len(boundVars))
	for i, v := range boundVars {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "SESSION %s = ?", v)
		args[i] = s
	}
	return b.String(), args
}

// BoundSession implements Dialect: BoundTx, whose settings are the
// session's already.
func (m MySQL) BoundSession(remaining time.Duration) (string, []any) { return m.BoundTx(remaining) }

// ReadCommitted implements Dialect.
func (MySQL) ReadCommitted() string { return "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED" }

// boundVars are the session variables BoundTx sets and UnboundTx restores.
var boundVars = []string{"wait_timeout", "innodb_lock_wait_timeout", "net_read_timeout", "net_write_timeout"}

// UnboundTx implements Dialect: the session's values from before BoundTx,
// so that a pooled connection does not carry a finished transaction's
// bounds into later statements.
func (MySQL) UnboundTx() string {
	set := make([]string, 0, 2*len(boundVars))
	for _, v := range boundVars {
		set = append(set, fmt.Sprintf("SESSION %s = @migrate_%s", v, v))
	}
	for _, v := range boundVars {
		set = append(set, fmt.Sprintf("@migrate_%s = NULL", v))
	}
	return "SET " + strings.Join(set, ", ")
}
