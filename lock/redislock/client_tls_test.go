package redislock

import (
	"crypto/tls"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
)

// tlsTestPassword has characters every escaping changes.
const tlsTestPassword = `Rd:s/cr@t?x%41&+ =;<>"\!`

func noPassword(t *testing.T, what, text string) {
	t.Helper()
	for _, form := range []string{tlsTestPassword, url.QueryEscape(tlsTestPassword), url.PathEscape(tlsTestPassword),
		url.UserPassword("", tlsTestPassword).String()[1:]} {
		if strings.Contains(text, form) {
			t.Errorf("%s holds the password: %s", what, text)
		}
	}
}

// TestTLS_DialRedis: rediss:// with tls_ca_file reaches a TLS-only Redis
// (with a password) and runs a whole lease cycle there; the wrong CA and
// the system roots fail the handshake, with errors that name the
// certificate and never the password.
func TestTLS_DialRedis(t *testing.T) {
	t.Parallel()
	certs := testsvc.NewCerts(t)
	srv := testsvc.StartRedisTLS(t, certs, tlsTestPassword)
	rdb := dial(t, srv.URL)
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("ping over TLS with the server's CA: %v", err)
	}
	leaseCycle(t, newLocker(t, rdb, lock.Options{TTL: 2 * time.Second}), "migrate:{plan:tls:0}")

	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	plain := *u
	plain.Scheme, plain.RawQuery = "redis", ""
	if err := dial(t, plain.String()).Ping(t.Context()).Err(); err == nil {
		t.Errorf("a client without TLS reached the TLS-only server")
	}
	for _, c := range []struct{ name, query string }{
		{"the wrong CA", "tls_ca_file=" + url.QueryEscape(certs.WrongCAFile)},
		{"the system roots", ""},
	} {
		u.RawQuery = c.query
		rdb := dial(t, u.String())
		err := rdb.Ping(t.Context()).Err()
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: ping %v, want a certificate error", c.name, err)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		noPassword(t, c.name+" error", err.Error())
	}
}

// TestTLS_DialCluster: rediss+cluster:// with tls_ca_file finds every node
// of a TLS-only Redis Cluster, and leases on each of them work whole.
func TestTLS_DialCluster(t *testing.T) {
	t.Parallel()
	certs := testsvc.NewCerts(t)
	clusterSpread(t, testsvc.StartRedisClusterTLS(t, certs, 3).URL, "tls")
}

// TestTLS_DialSentinel: rediss+sentinel:// with tls_ca_file asks a TLS-only
// sentinel for the primary and holds leases there over TLS.
func TestTLS_DialSentinel(t *testing.T) {
	t.Parallel()
	certs := testsvc.NewCerts(t)
	rdb := dial(t, testsvc.StartRedisSentinelTLS(t, certs))
	leaseCycle(t, newLocker(t, rdb, lock.Options{TTL: 2 * time.Second}), "migrate:{plan:tls:0}")
}

// TestTLS_DialOptions: tls_ca_file is taken out of the URL and becomes the
// roots of the TLS config go-redis made for rediss… (server name: the URL's
// host), for one server, Sentinel and Cluster; the other parameters stay.
func TestTLS_DialOptions(t *testing.T) {
	certs := testsvc.NewCerts(t)
	ca := "tls_ca_file=" + url.QueryEscape(certs.CAFile)
	check := func(url string, c *tls.Config, want string) {
		t.Helper()
		if c == nil || c.RootCAs == nil || c.ServerName != want || c.MinVersion < tls.VersionTLS12 || c.InsecureSkipVerify {
			t.Errorf("%s: TLS config %+v, want the CA as roots and server name %s", url, c, want)
		}
	}
	for _, u := range []string{"rediss://:pw@db.example.com:6380/2?" + ca + "&dial_timeout=7s", "REDISS://db.example.com:6380?" + ca} {
		rdb, err := Dial(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		o := rdb.(*redis.Client).Options()
		check(u, o.TLSConfig, "db.example.com")
		if strings.Contains(u, "dial_timeout") && (o.DialTimeout != 7*time.Second || o.DB != 2 || o.Password != "pw") {
			t.Errorf("%s: dial timeout %v db %d: the other parameters were lost", u, o.DialTimeout, o.DB)
		}
		_ = rdb.Close()
	}
	u := "rediss+sentinel://s1.example.com:26380/0?master_name=main&" + ca + "&addr=s2.example.com:26380"
	rdb, err := Dial(u)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	check(u, rdb.(*redis.Client).Options().TLSConfig, "s1.example.com")
	_ = rdb.Close()
	u = "rediss+cluster://n1.example.com:7000?" + ca + "&addr=n2.example.com:7000"
	rdb, err = Dial(u)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	o := rdb.(*redis.ClusterClient).Options()
	check(u, o.TLSConfig, "n1.example.com")
	if len(o.Addrs) != 2 {
		t.Errorf("%s: addresses %v, want both nodes", u, o.Addrs)
	}
	_ = rdb.Close()
}

// TestTLS_DialErrors: a tls_ca_file that cannot be used, or on a URL
// without TLS, is refused at Dial, naming the parameter and never the
// password.
func TestTLS_DialErrors(t *testing.T) {
	certs := testsvc.NewCerts(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	userinfo := url.UserPassword("", tlsTestPassword).String()
	ca := url.QueryEscape(certs.CAFile)
	for _, c := range []struct{ url, want string }{
		{"rediss://" + userinfo + "@127.0.0.1:1/0?tls_ca_file=" + url.QueryEscape("/nonexistent/ca.pem"), "tls_ca_file: open /nonexistent/ca.pem: no such file"},
		{"rediss://" + userinfo + "@127.0.0.1:1/0?tls_ca_file=" + url.QueryEscape(notPEM), "tls_ca_file " + notPEM + " holds no PEM certificate"},
		{"rediss://" + userinfo + "@127.0.0.1:1/0?tls_ca_file=", "tls_ca_file is empty"},
		{"rediss://" + userinfo + "@127.0.0.1:1/0?tls_ca_file=" + ca + "&tls_ca_file=" + ca, "tls_ca_file is given twice"},
		{"redis://" + userinfo + "@127.0.0.1:1/0?tls_ca_file=" + ca, "tls_ca_file needs TLS"},
		{"redis+sentinel://" + userinfo + "@127.0.0.1:1/0?master_name=m&tls_ca_file=" + ca, "tls_ca_file needs TLS"},
		{"redis+cluster://" + userinfo + "@127.0.0.1:1?tls_ca_file=" + ca, "tls_ca_file needs TLS"},
	} {
		rdb, err := Dial(c.url)
		if err == nil {
			_ = rdb.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.want, err, c.want)
			continue
		}
		noPassword(t, "error", err.Error())
	}
}

func TestTLS_CutParam(t *testing.T) {
	for _, c := range []struct{ in, out, value string }{
		{"h:1/0", "h:1/0", ""},
		{"h:1/0?tls_ca_file=%2Fa%20b.pem", "h:1/0", "/a b.pem"},
		{"h:1/0?a=1&tls_ca_file=x&b=%41", "h:1/0?a=1&b=%41", "x"},
		{"h:1/0?tls%5Fca%5Ffile=x&password=p%26q", "h:1/0?password=p%26q", "x"},
	} {
		out, v, found, err := cutParam(c.in, tlsCAParam)
		if err != nil || out != c.out || v != c.value || found != (c.value != "") {
			t.Errorf("cutParam(%q) = %q, %q, %v, %v; want %q, %q", c.in, out, v, found, err, c.out, c.value)
		}
	}
}
