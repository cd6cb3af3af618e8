package testsvc

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// NewMySQLDB creates a fresh utf8mb4 database on the shared MariaDB/MySQL
// server and returns its mysql:// URL; the database is dropped when the test
// ends.
func NewMySQLDB(t testing.TB) string {
	t.Helper()
	base := MySQLURL(t)
	name := Prefix(t)
	admin := OpenMySQL(t, base)
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+quoteMySQL(name)+" CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+quoteMySQL(name))
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	u.RawQuery = ""
	return u.String()
}

// OpenMySQL opens a database/sql pool on a mysql://user:pass@host:port/db
// URL, closed when the test ends. Sessions use UTC (time_zone '+00:00') and
// scan DATE/DATETIME/TIMESTAMP into time.Time in UTC.
func OpenMySQL(t testing.TB, u string) *sql.DB {
	t.Helper()
	cfg, err := mysqlConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("mysql connector: %v", err)
	}
	db := sql.OpenDB(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		t.Fatalf("mysql not reachable: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// mysqlConfig converts a mysql:// URL into a driver configuration. Its
// errors never include the password.
func mysqlConfig(u string) (*mysql.Config, error) {
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "mysql" || p.Host == "" {
		return nil, fmt.Errorf("testsvc: %q is not a mysql://user:pass@host:port/db URL", redactURL(u))
	}
	host := p.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "3306")
	}
	cfg := mysql.NewConfig() // keeps the driver's defaults (native password auth, packet size)
	cfg.User = p.User.Username()
	cfg.Passwd, _ = p.User.Password()
	cfg.Net = "tcp"
	cfg.Addr = host
	cfg.DBName = strings.TrimPrefix(p.Path, "/")
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	return cfg, nil
}

func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// quoteMySQL quotes one MySQL identifier with backticks.
func quoteMySQL(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
