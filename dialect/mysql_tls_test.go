package dialect

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// tlsTestPassword has characters every escaping changes.
const tlsTestPassword = `Tls:s/cr@t?x%41&+ =;<>"\!`

func mustDSN(t *testing.T, s string) plans.DSN {
	t.Helper()
	d, err := plans.ParseDSN(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return d
}

// noPassword fails when text holds the password in any usual form.
func noPassword(t *testing.T, what, text, pw string) {
	t.Helper()
	for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw), url.UserPassword("", pw).String()[1:]} {
		if strings.Contains(text, form) {
			t.Errorf("%s holds the password: %s", what, text)
		}
	}
}

// TestTLS_MySQLConfig: tls-ca is taken out of the parameters (never sent as
// a session variable) and becomes a TLS config with the CA as the only
// root, the DSN's host as server name and TLS 1.2 at least, in the URL and
// the native form; tls=true in a URL checks the URL's host, not 127.0.0.1.
func TestTLS_MySQLConfig(t *testing.T) {
	certs := testsvc.NewCerts(t)
	userinfo := url.UserPassword("u", tlsTestPassword).String()
	ca := url.QueryEscape(certs.CAFile)
	for _, c := range []struct{ dsn, host string }{
		{"mysql://" + userinfo + "@db.example.com:3307/x?tls-ca=" + ca, "db.example.com"},
		{"mysql://" + userinfo + "@db.example.com/x?tls=true&tls-ca=" + ca + "&timeout=5s", "db.example.com"},
		{"mysql://" + userinfo + "@[::1]:3307/x?tls-ca=" + ca, "::1"},
		{"u:pw@tcp(db.example.com:3307)/x?tls-ca=" + ca, "db.example.com"},
		{"u:pw@tcp(127.0.0.1:3307)/x?tls=true&tls-ca=" + ca, "127.0.0.1"},
	} {
		cfg, err := mysqlConfig(mustDSN(t, c.dsn))
		if err != nil {
			t.Errorf("%s: %v", c.dsn, err)
			continue
		}
		if _, ok := cfg.Params[tlsCAParam]; ok {
			t.Errorf("%s: %s left in the session parameters %v", c.dsn, tlsCAParam, cfg.Params)
		}
		if cfg.TLS == nil || cfg.TLS.RootCAs == nil || cfg.TLS.InsecureSkipVerify || cfg.TLS.ServerName != c.host || cfg.TLS.MinVersion != tls.VersionTLS12 {
			t.Errorf("%s: TLS %+v, want the CA as roots, server name %s, TLS 1.2+", c.dsn, cfg.TLS, c.host)
		}
	}
	for _, dsn := range []string{"mysql://u:pw@db.example.com:3307/x?tls=true", "u:pw@tcp(db.example.com:3307)/x?tls=true"} {
		cfg, err := mysqlConfig(mustDSN(t, dsn))
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if cfg.TLS == nil || cfg.TLS.RootCAs != nil || cfg.TLS.ServerName != "db.example.com" {
			t.Errorf("%s: TLS %+v, want the system roots for db.example.com", dsn, cfg.TLS)
		}
	}
	if cfg, err := mysqlConfig(mustDSN(t, "mysql://u:pw@db.example.com/x?tls=skip-verify")); err != nil || cfg.TLS == nil || !cfg.TLS.InsecureSkipVerify {
		t.Errorf("tls=skip-verify: %+v, %v", cfg, err)
	}
}

// TestTLS_MySQLConfigErrors: a bad tls-ca names the parameter (and the
// file), never the password.
func TestTLS_MySQLConfigErrors(t *testing.T) {
	certs := testsvc.NewCerts(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	userinfo := url.UserPassword("u", tlsTestPassword).String()
	for _, c := range []struct{ query, want string }{
		{"tls-ca=" + url.QueryEscape("/nonexistent/ca.pem"), "tls-ca: open /nonexistent/ca.pem: no such file"},
		{"tls-ca=" + url.QueryEscape(notPEM), "tls-ca " + notPEM + " holds no PEM certificate"},
		{"tls-ca=", "tls-ca is empty"},
		{"tls=false&tls-ca=" + url.QueryEscape(certs.CAFile), "tls-ca goes with tls=true or no tls parameter"},
		{"tls=skip-verify&tls-ca=" + url.QueryEscape(certs.CAFile), "tls-ca goes with tls=true"},
		{"tls=preferred&tls-ca=" + url.QueryEscape(certs.CAFile), "tls-ca goes with tls=true"},
	} {
		for _, dsn := range []string{
			"mysql://" + userinfo + "@127.0.0.1:3306/x?" + c.query,
			"u:" + tlsTestPassword + "@tcp(127.0.0.1:3306)/x?" + c.query,
		} {
			_, err := (MySQL{}).Open(mustDSN(t, dsn), Session{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %v, want one with %q", c.query, err, c.want)
				continue
			}
			if !strings.Contains(err.Error(), "mysql DSN ") || !strings.Contains(err.Error(), "xxxxx") {
				t.Errorf("%s: error %q does not name the redacted DSN", c.query, err)
			}
			noPassword(t, "error", err.Error(), tlsTestPassword)
		}
	}
	_, err := (MySQL{}).Open(mustDSN(t, "u:"+tlsTestPassword+"@unix(/tmp/mysql.sock)/x?tls-ca="+url.QueryEscape(certs.CAFile)), Session{})
	if err == nil || !strings.Contains(err.Error(), "tls-ca needs a TCP address") {
		t.Errorf("unix socket: %v, want tls-ca needs a TCP address", err)
	}
}

// TestTLS_MySQLServer: against a private MariaDB with TLS whose user
// REQUIRE SSL, tls-ca with the right CA connects over TLS (by IP and by
// name); the wrong CA, the system roots (tls=true) and no TLS are refused,
// with errors that never hold the password.
func TestTLS_MySQLServer(t *testing.T) {
	certs := testsvc.NewCerts(t)
	srv := testsvc.StartMariaDB(t, "--ssl-cert="+certs.CertFile, "--ssl-key="+certs.KeyFileFor(t, "mysql"), "--ssl-ca="+certs.CAFile)
	base := srv.AddUser(t, "tlsuser", tlsTestPassword, "REQUIRE SSL")
	// open connects with dsn and returns the session's TLS version.
	open := func(dsn string) (string, error) {
		db, err := (MySQL{}).Open(mustDSN(t, dsn), Session{})
		if err != nil {
			return "", err
		}
		t.Cleanup(func() { _ = db.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var version string
		err = db.QueryRowContext(ctx, "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_version'").Scan(&version)
		return version, err
	}
	ca := url.QueryEscape(certs.CAFile)
	byName := strings.Replace(base, "127.0.0.1", "localhost", 1)
	for _, dsn := range []string{base + "?tls-ca=" + ca, byName + "?tls=true&tls-ca=" + ca} {
		version, err := open(dsn)
		if err != nil {
			t.Fatalf("tls-ca with the server's CA: %v", err)
		}
		if version != "TLSv1.2" && version != "TLSv1.3" {
			t.Errorf("session Ssl_version %q, want TLSv1.2 or later", version)
		}
	}
	for _, c := range []struct{ name, query, want string }{
		{"the wrong CA", "?tls-ca=" + url.QueryEscape(certs.WrongCAFile), "certificate"},
		{"the system roots", "?tls=true", "certificate"},
		{"no TLS for a REQUIRE SSL user", "", "Access denied"},
	} {
		_, err := open(base + c.query)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		noPassword(t, c.name+" error", err.Error(), tlsTestPassword)
		var me *mysql.MySQLError
		if c.want == "certificate" && errors.As(err, &me) {
			t.Errorf("%s: the server answered (%v): the TLS handshake should have failed", c.name, err)
		}
	}
}
