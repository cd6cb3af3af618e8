package testsvc

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDBServer is a private MariaDB server for one test, for settings the
// shared server must not have (TLS options given at start, users that
// require SSL). It listens on 127.0.0.1 on a free port and on a unix socket
// in its folder, and has an empty database "migrate".
type MariaDBServer struct {
	t    testing.TB
	dir  string
	Port int
	Sock string // unix socket: root logs in there without a password
	cmd  *exec.Cmd
	done chan struct{}
	args []string // mariadbd's
	log  string
}

// StartMariaDB initialises a data folder with mariadb-install-db and runs
// mariadbd on it as the mysql user, with more server options args (e.g.
// "--ssl-cert=…"); the server is stopped and its folder removed when the
// test ends.
func StartMariaDB(t testing.TB, args ...string) *MariaDBServer {
	t.Helper()
	MySQLURL(t) // the packages are installed
	mysqld, err := exec.LookPath("mariadbd")
	if err != nil {
		mysqld = "/usr/sbin/mariadbd"
	}
	dir, err := os.MkdirTemp("", "migrate-mariadb-") // not t.TempDir: the mysql user must reach it
	if err != nil {
		t.Fatal(err)
	}
	s := &MariaDBServer{t: t, dir: dir, Port: FreePort(t), Sock: filepath.Join(dir, "run", "mysql.sock")}
	t.Cleanup(func() {
		s.stop()
		_ = os.RemoveAll(dir)
	})
	u, err := user.Lookup("mysql")
	if err != nil {
		t.Fatalf("private mariadb: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// A tmpdir of its own: a MariaDB starting deletes the #sql temporary
	// files it finds in its tmpdir, and the shared server's are in /tmp.
	data, run, tmp := filepath.Join(dir, "data"), filepath.Join(dir, "run"), filepath.Join(dir, "tmp")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{data, run, tmp} {
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.Command("mariadb-install-db", "--user=mysql", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("private mariadb: mariadb-install-db: %v\n%s", err, out)
	}
	s.log = filepath.Join(run, "mysql.log")
	s.args = append([]string{mysqld, "--no-defaults", "--user=mysql", "--datadir=" + data,
		"--port=" + strconv.Itoa(s.Port), "--bind-address=127.0.0.1", "--socket=" + s.Sock,
		"--pid-file=" + filepath.Join(run, "mysql.pid"), "--log-error=" + s.log, "--tmpdir=" + tmp,
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci", "--max-connections=100",
		"--innodb-flush-log-at-trx-commit=2", "--innodb-buffer-pool-size=64M", "--max-allowed-packet=64M",
		"--skip-name-resolve"}, args...)
	s.Start()
	root := s.root("")
	defer root.Close()
	if _, err := root.ExecContext(context.Background(), "CREATE DATABASE migrate CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("private mariadb: %v", err)
	}
	return s
}

// Start starts the server (again, after Crash: crash recovery) and waits
// until it accepts connections.
func (s *MariaDBServer) Start() {
	t := s.t
	t.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("private mariadb: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)

	root := s.root("")
	defer root.Close()
	var last error
	ready := false
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end) && !ready; time.Sleep(100 * time.Millisecond) {
		select {
		case <-s.done:
			b, _ := os.ReadFile(s.log)
			t.Fatalf("private mariadb exited at start:\n%s", tail(string(b), 20))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = root.PingContext(ctx)
		cancel()
		if last == nil { // the socket answers; clients come over TCP
			var c net.Conn
			if c, last = net.DialTimeout("tcp", s.Addr(), 2*time.Second); last == nil {
				_ = c.Close()
			}
		}
		ready = last == nil
	}
	if !ready {
		b, _ := os.ReadFile(s.log)
		t.Fatalf("private mariadb not ready within 60s: %v\n%s", last, tail(string(b), 20))
	}
}

// Crash kills the server with SIGKILL and waits for it to exit; the data
// it wrote stays in the operating system's cache, as after a crash of the
// server (not of the machine). Start runs its crash recovery.
func (s *MariaDBServer) Crash() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Addr is the server's 127.0.0.1:port.
func (s *MariaDBServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Log is the server's error log.
func (s *MariaDBServer) Log() string { return filepath.Join(s.dir, "run", "mysql.log") }

// root is a pool as root over the unix socket.
func (s *MariaDBServer) root(db string) *sql.DB {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "unix", s.Sock, db
	cfg.ParseTime, cfg.Loc = true, time.UTC
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		s.t.Fatalf("private mariadb: %v", err)
	}
	return sql.OpenDB(conn)
}

// OpenRoot opens a pool as root over the unix socket (no TLS, no password)
// on database db ("" for none), with UTC sessions; closed when the test
// ends.
func (s *MariaDBServer) OpenRoot(t testing.TB, db string) *sql.DB {
	t.Helper()
	pool := s.root(db)
	t.Cleanup(func() { _ = pool.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.PingContext(ctx); err != nil {
		t.Fatalf("private mariadb: %v", err)
	}
	return pool
}

// AddUser creates name@127.0.0.1 with password and every privilege, with
// the account option require ("" or e.g. "REQUIRE SSL"), and returns its
// mysql://name:password@127.0.0.1:port/migrate URL (password
// percent-encoded).
func (s *MariaDBServer) AddUser(t testing.TB, name, password, require string) string {
	t.Helper()
	root := s.OpenRoot(t, "")
	ctx := context.Background()
	for _, q := range []string{
		fmt.Sprintf("CREATE USER %s@'127.0.0.1' IDENTIFIED BY %s %s", quoteMySQLString(name), quoteMySQLString(password), require),
		fmt.Sprintf("GRANT ALL ON *.* TO %s@'127.0.0.1' WITH GRANT OPTION", quoteMySQLString(name)),
	} {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("private mariadb: create user %s: %v", name, err) // not q: it holds the password
		}
	}
	return (&url.URL{Scheme: "mysql", User: url.UserPassword(name, password), Host: s.Addr(), Path: "/migrate"}).String()
}

// quoteMySQLString is a MySQL string literal (for the default sql_mode,
// where a backslash escapes).
func quoteMySQLString(v string) string {
	out := []byte{'\''}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\'':
			out = append(out, '\'', '\'')
		case '\\':
			out = append(out, '\\', '\\')
		default:
			out = append(out, c)
		}
	}
	return string(append(out, '\''))
}

// stop ends the server with SIGTERM (SIGKILL after 30s) and waits for it.
func (s *MariaDBServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil || s.done == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
