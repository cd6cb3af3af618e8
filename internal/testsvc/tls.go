package testsvc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/internal/svcproc"
)

// Certs are PEM files for TLS tests: a CA, a server certificate it signed
// for 127.0.0.1, ::1 and localhost, and an unrelated CA that did not sign
// it. They live in a folder every user may read (servers running as the
// postgres or mysql user load them), removed when the test ends.
type Certs struct {
	Dir         string
	CAFile      string // the CA that signed CertFile
	CertFile    string // the server certificate
	KeyFile     string // its ECDSA key, 0600, owned by the user running the test
	WrongCAFile string // a CA that signed nothing here: verification against it fails
	keyPEM      []byte
}

// NewCerts generates the certificates with Go's crypto (ECDSA P-256), valid
// from an hour ago for a day.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir, err := os.MkdirTemp("", "migrate-tls-") // not t.TempDir: server users must reach it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Certs{Dir: dir, CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "server.pem"),
		KeyFile: filepath.Join(dir, "server-key.pem"), WrongCAFile: filepath.Join(dir, "wrong-ca.pem")}

	ca, caKey := newCA(t, "migrate test CA")
	wrong, _ := newCA(t, "migrate unrelated test CA")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c.keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	writePEM(t, c.CAFile, 0o644, "CERTIFICATE", ca.Raw)
	writePEM(t, c.WrongCAFile, 0o644, "CERTIFICATE", wrong.Raw)
	writePEM(t, c.CertFile, 0o644, "CERTIFICATE", der)
	if err := os.WriteFile(c.KeyFile, c.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// newCA is a self-signed CA certificate and its key.
func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, path string, mode os.FileMode, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

// KeyFileFor returns a copy of the server key owned by the system user
// name, mode 0600: PostgreSQL refuses a key another user may read, and
// MariaDB must be able to read its own.
func (c *Certs) KeyFileFor(t testing.TB, name string) string {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("tls key for %s: %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	path := filepath.Join(c.Dir, "server-key-"+name+".pem")
	if err := os.WriteFile(path, c.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatalf("tls key for %s: %v", name, err)
	}
	return path
}

// EnablePostgresTLS turns SSL on in a private PostgreSQL server (ALTER
// SYSTEM and a reload: no restart) with c's certificate, waits until a
// verify-full connection succeeds, and returns that URL:
// postgres://…/migrate?sslmode=verify-full&sslrootcert=CAFILE. The server
// still accepts connections without TLS (its pg_hba host lines take both).
func EnablePostgresTLS(t testing.TB, s *PostgresServer, c *Certs) string {
	t.Helper()
	db := OpenPostgres(t, s.URL)
	key := c.KeyFileFor(t, "postgres")
	for _, q := range []string{
		"ALTER SYSTEM SET ssl_cert_file = " + quoteLiteral(c.CertFile),
		"ALTER SYSTEM SET ssl_key_file = " + quoteLiteral(key),
		"ALTER SYSTEM SET ssl = on",
		"SELECT pg_reload_conf()",
	} {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("postgres tls: %s: %v", q, err)
		}
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", "verify-full")
	q.Set("sslrootcert", c.CAFile)
	u.RawQuery = q.Encode()
	tlsURL := u.String()
	cfg, err := pgx.ParseConfig(tlsURL)
	if err != nil {
		t.Fatalf("postgres tls URL: %v", err)
	}
	var last error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			var ssl bool
			err = conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl)
			_ = conn.Close(ctx)
			if err == nil && !ssl {
				err = fmt.Errorf("connected without SSL")
			}
		}
		cancel()
		if err == nil {
			return tlsURL
		}
		last = err
	}
	logTail, _ := os.ReadFile(filepath.Join(s.dir, "pg.log"))
	t.Fatalf("postgres tls: no verify-full connection within 30s: %v\nserver log:\n%s", last, tail(string(logTail), 20))
	return ""
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// RedisTLS is a private redis-server that listens only with TLS.
type RedisTLS struct {
	Server   *svcproc.Server
	Password string
	// URL is rediss://:PASSWORD@127.0.0.1:PORT/0?tls_ca_file=CAFILE (the
	// password percent-encoded).
	URL string
}

// StartRedisTLS starts a redis-server with TLS only on 127.0.0.1 (no plain
// port, no client certificates asked for) using c's certificate, and the
// password in its config file (requirepass; "" for none). It is stopped
// when the test ends.
func StartRedisTLS(t testing.TB, c *Certs, password string) *RedisTLS {
	t.Helper()
	var conf strings.Builder
	if password != "" {
		conf.WriteString("requirepass \"")
		for _, b := range []byte(password) { // every byte as \xHH: any password fits
			fmt.Fprintf(&conf, `\x%02x`, b)
		}
		conf.WriteString("\"\n")
	}
	srv := startRedisTLSNode(t, c, conf.String())
	u := &url.URL{Scheme: "rediss", Host: srv.Addr(), Path: "/0", RawQuery: "tls_ca_file=" + url.QueryEscape(c.CAFile)}
	if password != "" {
		u.User = url.UserPassword("", password)
	}
	return &RedisTLS{Server: srv, Password: password, URL: u.String()}
}

// startRedisTLSNode starts one private redis-server that listens with TLS
// only, on its Port, with conf as its config file and more options args;
// it is stopped when the test ends.
func startRedisTLSNode(t testing.TB, c *Certs, conf string, args ...string) *svcproc.Server {
	t.Helper()
	RedisURL(t) // makes sure redis-server is installed
	bin, err := svcproc.FindRedis("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("ldd", bin).Output(); !strings.Contains(string(out), "libssl") {
		t.Fatalf("%s is not linked with libssl: this build of Redis has no TLS support", bin)
	}
	srv, err := svcproc.Redis(bin, t.TempDir(), false, func(c *exec.Cmd) { c.Stdout, c.Stderr = os.Stderr, os.Stderr })
	if err != nil {
		t.Fatal(err)
	}
	srv.Conf = filepath.Join(srv.Dir(), "redis.conf")
	if err := os.WriteFile(srv.Conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// After the defaults: the TLS port is the one Start waits for, the
	// plain one is closed.
	srv.Args = append([]string{"--tls-port", strconv.Itoa(srv.Port), "--port", "0",
		"--tls-cert-file", c.CertFile, "--tls-key-file", c.KeyFile, "--tls-ca-cert-file", c.CAFile,
		"--tls-auth-clients", "no"}, args...)
	if err := srv.Start(context.Background()); err != nil {
		log, _ := os.ReadFile(filepath.Join(srv.Dir(), "redis.log"))
		t.Fatalf("redis with TLS: %v\n%s", err, tail(string(log), 20))
	}
	t.Cleanup(srv.Kill)
	return srv
}

// clientTLS is a TLS config trusting c's CA, for tests' own clients.
func (c *Certs) clientTLS(t testing.TB) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// StartRedisClusterTLS is StartRedisCluster with TLS only, for clients and
// the cluster bus (whose peers present the server certificate as client
// certificate); its URL is rediss+cluster://…&tls_ca_file=CAFILE.
func StartRedisClusterTLS(t testing.TB, c *Certs, n int) *RedisCluster {
	t.Helper()
	rc := startCluster(t, n, c.clientTLS(t), func(args ...string) *svcproc.Server {
		return startRedisTLSNode(t, c, "", append([]string{"--tls-cluster", "yes", "--tls-replication", "yes"}, args...)...)
	})
	rc.URL = "rediss+cluster://" + rc.URL + "&tls_ca_file=" + url.QueryEscape(c.CAFile)
	return rc
}

// StartRedisSentinelTLS starts a primary, its replica and one sentinel
// (quorum 1, name "main"), every one with TLS only (replication and the
// sentinel's links too), waits until the sentinel knows the replica in
// sync, and returns the rediss+sentinel://…?master_name=main&tls_ca_file=…
// URL of the sentinel.
func StartRedisSentinelTLS(t testing.TB, c *Certs) string {
	t.Helper()
	ctx := context.Background()
	primary := startRedisTLSNode(t, c, "", "--tls-replication", "yes")
	replica := startRedisTLSNode(t, c, "", "--tls-replication", "yes", "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	sentinel := startRedisTLSNode(t, c, fmt.Sprintf(`sentinel monitor main 127.0.0.1 %d 1
sentinel down-after-milliseconds main 1000
sentinel failover-timeout main 5000
`, primary.Port), "--sentinel", "--tls-replication", "yes")
	rep := redis.NewClient(&redis.Options{Addr: replica.Addr(), TLSConfig: c.clientTLS(t)})
	defer rep.Close()
	s := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr(), TLSConfig: c.clientTLS(t)})
	defer s.Close()
	waitFor(t, "TLS replica in sync and known to the sentinel", func() bool {
		info, err := rep.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return false
		}
		reps, err := s.Replicas(ctx, "main").Result()
		return err == nil && len(reps) == 1 && !strings.Contains(reps[0]["flags"], "down") &&
			reps[0]["port"] == strconv.Itoa(replica.Port)
	})
	return fmt.Sprintf("rediss+sentinel://%s/0?master_name=main&tls_ca_file=%s", sentinel.Addr(), url.QueryEscape(c.CAFile))
}
