package testsvc

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// RunScript runs a SQL script of several statements (a fixture's schema,
// an application's statements) on the database at url, postgres:// or
// mysql://, as one multi-statement request: PostgreSQL's simple protocol,
// MySQL's multiStatements. It returns the server's error, if any.
func RunScript(t testing.TB, url, script string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if strings.HasPrefix(url, "postgres") {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, script, pgx.QueryExecModeSimpleProtocol)
		return err
	}
	cfg, err := mysqlConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MultiStatements = true
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = db.ExecContext(ctx, script)
	return err
}
