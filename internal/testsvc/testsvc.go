// Package testsvc gives tests real PostgreSQL, MariaDB, Redis, etcd and
// ZooKeeper servers.
//
// The URLs come from MIGRATE_TEST_PG, MIGRATE_TEST_MYSQL, MIGRATE_TEST_REDIS,
// MIGRATE_TEST_ETCD and MIGRATE_TEST_ZK;
// when one is unset, the project's own scripts/services.sh starts private
// servers on 127.0.0.1 (installing what is missing with apt-get) and reports
// theirs. A missing service is a test failure, never a skip.
package testsvc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

var (
	startOnce sync.Once
	started   map[string]string
	startErr  error
)

// RepoRoot returns the directory holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testsvc: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// url returns the URL of one service: from env, else from services.sh start.
func serviceURL(t testing.TB, env string) string {
	t.Helper()
	if u := os.Getenv(env); u != "" {
		return u
	}
	startOnce.Do(func() {
		root := RepoRoot(t)
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "services.sh"), "start")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			startErr = fmt.Errorf("scripts/services.sh start: %v\n%s", err, errb.String())
			return
		}
		started = map[string]string{}
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			line := strings.TrimPrefix(sc.Text(), "export ")
			k, v, ok := strings.Cut(line, "=")
			if ok {
				started[k] = strings.Trim(v, "'")
			}
		}
	})
	if startErr != nil {
		t.Fatal(startErr)
	}
	u := started[env]
	if u == "" {
		t.Fatalf("testsvc: services.sh reported no %s", env)
	}
	return u
}

// PostgresURL is the URL of the shared PostgreSQL server's default database.
func PostgresURL(t testing.TB) string { return serviceURL(t, "MIGRATE_TEST_PG") }

// MySQLURL is the URL of the shared MariaDB/MySQL server's default database.
func MySQLURL(t testing.TB) string { return serviceURL(t, "MIGRATE_TEST_MYSQL") }

// RedisURL is the URL of the shared Redis server. Tests share it: use Prefix
// for key names.
func RedisURL(t testing.TB) string { return serviceURL(t, "MIGRATE_TEST_REDIS") }

// EtcdURL is the etcd:// URL of the shared etcd server, with a key prefix
// of its own. Tests share it: use Prefix for lease names.
func EtcdURL(t testing.TB) string { return serviceURL(t, "MIGRATE_TEST_ETCD") }

// ZooKeeperURL is the zk:// URL of the shared ZooKeeper server, with a
// prefix of its own. Tests share it: use Prefix for lease names.
func ZooKeeperURL(t testing.TB) string { return serviceURL(t, "MIGRATE_TEST_ZK") }

// Prefix returns a name unique to this test run, usable in Redis keys, plan
// names and database names ([a-z0-9_]).
func Prefix(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.ToLower(t.Name())
	var sb strings.Builder
	for _, r := range name {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			sb.WriteRune(r)
		} else {
			sb.WriteRune('_')
		}
	}
	s := sb.String()
	if len(s) > 30 {
		s = s[:30]
	}
	return "t_" + s + "_" + hex.EncodeToString(b[:])
}

// Engine is a target engine the tests run against: its name (a subtest's)
// and what makes a fresh database of it for a test.
type Engine struct {
	Name  string
	NewDB func(testing.TB) string
}

// Engines are the target engines, PostgreSQL and MySQL/MariaDB.
var Engines = []Engine{{"postgres", NewPostgresDB}, {"mysql", NewMySQLDB}}

// NewPostgresDB creates a fresh database on the shared PostgreSQL server and
// returns its URL; the database is dropped when the test ends.
func NewPostgresDB(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	name := Prefix(t)
	admin := OpenPostgres(t, base)
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// OpenPostgres opens a database/sql pool on url, closed when the test ends.
func OpenPostgres(t testing.TB, u string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("postgres not reachable: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
