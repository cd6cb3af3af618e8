package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/plans"
)

// Services are the servers the bench measures on: PostgreSQL, MariaDB and
// Redis, from the URLs of scripts/services.sh. Passwords reach the clients
// through their environment (PGPASSWORD, MYSQL_PWD, MIGRATE_*), never argv.
type Services struct {
	pg, my plans.DSN // the servers' default databases
	redis  plans.DSN
	rdb    *redis.Client
	psql   string // the psql client
	pools  map[string]*sql.DB
}

// OpenServices checks the three URLs and connects to Redis; database
// connections are opened as they are needed.
func OpenServices(ctx context.Context, pgURL, myURL, redisURL string) (*Services, error) {
	s := &Services{pools: map[string]*sql.DB{}}
	for _, u := range []struct {
		env, url string
		want     plans.Engine
		dst      *plans.DSN
	}{
		{"MIGRATE_TEST_PG", pgURL, plans.Postgres, &s.pg},
		{"MIGRATE_TEST_MYSQL", myURL, plans.MySQL, &s.my},
		{"MIGRATE_TEST_REDIS", redisURL, plans.Redis, &s.redis},
	} {
		d, err := plans.ParseDSN(u.url)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u.env, err)
		}
		if d.Engine() != u.want || d.Native() {
			return nil, fmt.Errorf("%s: %s is not a %s:// URL", u.env, d, u.want)
		}
		*u.dst = d
	}
	o, err := redis.ParseURL(s.redis.Secret())
	if err != nil {
		return nil, fmt.Errorf("MIGRATE_TEST_REDIS %s: %w", s.redis, err)
	}
	s.rdb = redis.NewClient(o)
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		_ = s.rdb.Close()
		return nil, fmt.Errorf("redis %s: %w", s.redis, err)
	}
	s.psql = findPsql()
	return s, nil
}

// findPsql is psql on PATH, else the newest PostgreSQL's.
func findPsql() string {
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	if len(found) == 0 {
		return "psql"
	}
	slices.Sort(found)
	return found[len(found)-1]
}

// Close closes every connection.
func (s *Services) Close() {
	for _, db := range s.pools {
		_ = db.Close()
	}
	_ = s.rdb.Close()
}

// Redact replaces the servers' passwords in text that may hold them (a
// tool's error output).
func (s *Services) Redact(text string) string {
	return plans.Redact(text, []string{s.pg.Password(), s.my.Password(), s.redis.Password()})
}

// URL is the URL of database db on the server of engine e, password
// included: for migrate's environment, never for printing.
func (s *Services) URL(e Engine, db string) string {
	d := s.pg
	if e == MY {
		d = s.my
	}
	u, _ := url.Parse(d.Secret()) // parsed by plans.ParseDSN before
	u.Path = "/" + db
	return u.String()
}

// RedisURL is the Redis URL, password included.
func (s *Services) RedisURL() string { return s.redis.Secret() }

func hostPort(d plans.DSN, def string) string { return net.JoinHostPort(d.Host(), or(d.Port(), def)) }

// DB is a connection pool on database db of engine e.
func (s *Services) DB(e Engine, db string) (*sql.DB, error) {
	key := string(e) + "/" + db
	if p := s.pools[key]; p != nil {
		return p, nil
	}
	var p *sql.DB
	if e == PG {
		var err error
		if p, err = sql.Open("pgx", s.URL(PG, db)); err != nil {
			return nil, fmt.Errorf("postgres %s: %w", db, err)
		}
	} else {
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd = s.my.User(), s.my.Password()
		cfg.Net, cfg.Addr, cfg.DBName = "tcp", hostPort(s.my, "3306"), db
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("mariadb %s: %w", db, err)
		}
		p = sql.OpenDB(conn)
	}
	s.pools[key] = p
	return p, nil
}

// closeDB closes the pool on db, before the database is dropped.
func (s *Services) closeDB(e Engine, db string) {
	key := string(e) + "/" + db
	if p := s.pools[key]; p != nil {
		_ = p.Close()
		delete(s.pools, key)
	}
}

// Exec runs statements one by one on db of engine e ("" for the server's
// default database).
func (s *Services) Exec(ctx context.Context, e Engine, db string, stmts ...string) error {
	db = or(db, s.defaultDB(e))
	p, err := s.DB(e, db)
	if err != nil {
		return err
	}
	for _, q := range stmts {
		if _, err := p.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s database %s: %s: %w", e, db, firstLine(q), err)
		}
	}
	return nil
}

// Scan runs one query that returns one row on db of engine e ("" for the
// default database) and scans it into dst.
func (s *Services) Scan(ctx context.Context, e Engine, db, q string, dst ...any) error {
	db = or(db, s.defaultDB(e))
	p, err := s.DB(e, db)
	if err != nil {
		return err
	}
	if err := p.QueryRowContext(ctx, q).Scan(dst...); err != nil {
		return fmt.Errorf("%s database %s: %s: %w", e, db, firstLine(q), err)
	}
	return nil
}

func (s *Services) defaultDB(e Engine) string {
	if e == PG {
		return s.pg.Database()
	}
	return s.my.Database()
}

// Fresh makes db an empty database of engine e, then CHECKPOINTs
// PostgreSQL: no measurement pays for the writes of the one before.
func (s *Services) Fresh(ctx context.Context, e Engine, db string) error {
	if err := s.Drop(ctx, e, db); err != nil {
		return err
	}
	create := "CREATE DATABASE " + pgx.Identifier{db}.Sanitize()
	if e == MY {
		create = "CREATE DATABASE " + quoteMY(db) + " CHARACTER SET utf8mb4"
	}
	if err := s.Exec(ctx, e, "", create); err != nil {
		return err
	}
	return s.Checkpoint(ctx)
}

// Drop drops db of engine e, if it exists.
func (s *Services) Drop(ctx context.Context, e Engine, db string) error {
	s.closeDB(e, db)
	drop := "DROP DATABASE IF EXISTS " + pgx.Identifier{db}.Sanitize() + " WITH (FORCE)"
	if e == MY {
		drop = "DROP DATABASE IF EXISTS " + quoteMY(db)
	}
	return s.Exec(ctx, e, "", drop)
}

// Checkpoint flushes PostgreSQL's dirty pages.
func (s *Services) Checkpoint(ctx context.Context) error { return s.Exec(ctx, PG, "", "CHECKPOINT") }

// Psql is the psql client on db: unaligned, no header, quiet, stopping at
// the first error.
func (s *Services) Psql(ctx context.Context, db string, args ...string) *exec.Cmd {
	u := url.URL{Scheme: "postgres", User: url.User(s.pg.User()), Host: hostPort(s.pg, "5432"), Path: "/" + db, RawQuery: "sslmode=disable"}
	cmd := exec.CommandContext(ctx, s.psql, append([]string{"-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", u.String()}, args...)...)
	// no NOTICEs from DROP … IF EXISTS
	cmd.Env = append(os.Environ(), "PGPASSWORD="+s.pg.Password(), "PGOPTIONS=-c client_min_messages=warning")
	return cmd
}

// Mariadb is the mariadb client on db ("": none), tab-separated, no
// column names.
func (s *Services) Mariadb(ctx context.Context, db string, args ...string) *exec.Cmd {
	a := []string{"--no-defaults", "-h", s.my.Host(), "-P", or(s.my.Port(), "3306"), "-u", s.my.User(), "-N", "-B"}
	if db != "" {
		a = append(a, db)
	}
	cmd := exec.CommandContext(ctx, "mariadb", append(a, args...)...)
	cmd.Env = append(os.Environ(), "MYSQL_PWD="+s.my.Password())
	return cmd
}

// quoteMY quotes one MySQL identifier.
func quoteMY(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
