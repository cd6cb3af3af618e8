package etcdlock

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/svcproc"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/plans"
)

// password is the etcd password of these tests, with characters a URL
// must percent-encode.
const password = "s3cr@t/Pw?x"

// withUser is url (etcd:// or etcds://) with user and password in it.
func withUser(rawURL, user, pass string) string {
	scheme, rest, _ := strings.Cut(rawURL, "://")
	return scheme + "://" + url.UserPassword(user, pass).String() + "@" + rest
}

// TestDial_Refused: a DSN Dial cannot use is refused before any
// connection, with an error that says why and shows no password.
func TestDial_Refused(t *testing.T) {
	t.Parallel()
	certs := testsvc.NewCerts(t)
	for _, c := range []struct{ name, dsn, want string }{
		{"not etcd", "redis://u:" + url.QueryEscape(password) + "@h:1/0", "not an etcd"},
		{"TLS file without TLS", withUser("etcd://h/m", "u", password) + "?tls_ca_file=" + certs.CAFile, "tls_ca_file needs TLS"},
		{"unknown parameter", "etcds://h/m?tls_ca_fil=" + certs.CAFile, `unknown parameter "tls_ca_fil"`},
		{"parameter twice", "etcds://h/m?tls_ca_file=/a&tls_ca_file=/b", "given twice"},
		{"certificate without key", "etcds://h/m?tls_cert_file=" + certs.CertFile, "go together"},
		{"missing CA file", withUser("etcds://h/m", "u", password) + "?tls_ca_file=/nonexistent/ca.pem", "tls_ca_file"},
		{"not a CA file", "etcds://h/m?tls_ca_file=" + certs.KeyFile, "no PEM certificate"},
		{"user without password", "etcd://u@h/m", "needs a password"},
		{"password without user", "etcd://:" + url.PathEscape(password) + "@h/m", "needs a user name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := plans.ParseDSN(c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Dial(d, nil)
			if err == nil {
				_ = b.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want %q in it", err, c.want)
			}
			noSecret(t, "the error", err.Error(), password)
			noSecret(t, "the error", err.Error(), url.PathEscape(password))
		})
	}
}

// TestAcquire_Seconds: etcd grants leases in whole seconds, and no
// shorter than 1.5 election timeouts rounded up to a second (2s with
// etcd's default 100ms heartbeat and 1s election timeout): a TTL it
// would lengthen is refused, as the holder's deadline and a standby's
// wait would be wrong.
func TestAcquire_Seconds(t *testing.T) {
	t.Parallel()
	b := open(t, dsn(t, testsvc.EtcdURL(t)))
	if _, err := b.Acquire(t.Context(), newBase(t, b), "a", 1500*time.Millisecond); err == nil || !strings.Contains(err.Error(), "whole seconds") {
		t.Errorf("acquire for 1.5s = %v, want refused", err)
	}

	testsvc.EtcdURL(t) // makes sure etcd is installed
	bin, err := svcproc.FindEtcd("etcd")
	if err != nil {
		t.Fatal(err)
	}
	m, err := svcproc.Etcd(bin, t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Args = []string{"--heartbeat-interval", "100", "--election-timeout", "1000"} // etcd's defaults
	t.Cleanup(m.Kill)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	slow := open(t, dsn(t, m.DSN("migrate")))
	base := "migrate:{seconds}"
	if _, err := slow.Acquire(t.Context(), base, "a", time.Second); err == nil || !strings.Contains(err.Error(), "of 2s at least") {
		t.Errorf("acquire for 1s = %v, want refused: 2s at least", err)
	}
	g, err := slow.Acquire(t.Context(), base, "a", 2*time.Second)
	if err != nil || g.Status != lock.Granted {
		t.Errorf("acquire for 2s = %+v, %v", g, err)
	}
}

// TestDial_Auth: a user name and password authenticate to an etcd with
// authentication on; a wrong one is refused at Dial, with an error that
// shows neither password, and nothing logged shows it either.
func TestDial_Auth(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartEtcd(t)
	admin := open(t, dsn(t, srv.URL))
	ctx := t.Context()
	if _, err := admin.cli.UserAdd(ctx, "root", password); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	var logs testsvc.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() { noSecret(t, "the log", logs.String(), password) })

	t.Run("no user", func(t *testing.T) {
		t.Parallel()
		b := open(t, dsn(t, srv.URL))
		pctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := b.Ping(pctx); err == nil || !strings.Contains(err.Error(), "user name is empty") {
			t.Errorf("ping without a user = %v, want refused", err)
		}
	})
	t.Run("right password", func(t *testing.T) {
		t.Parallel()
		d := dsn(t, withUser(srv.URL, "root", password))
		b, err := Dial(d, log)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		noSecret(t, "String", b.String(), password)
		if err := b.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		l := newLocker(t, b, time.Second)
		le := mustAcquire(t, l, "migrate:{auth}", lock.NewOwnerID("a"))
		if err := le.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	for name, u := range map[string]*url.Userinfo{
		"wrong password": url.UserPassword("root", password+"-not"),
		"unknown user":   url.UserPassword("nobody", password),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _ := u.Password()
			b, err := Dial(dsn(t, withUser(srv.URL, u.Username(), p)), log)
			if err == nil {
				_ = b.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "authentication failed") {
				t.Errorf("error %q, want an authentication failure", err)
			}
			noSecret(t, "the error", err.Error(), password)
			noSecret(t, "the error", err.Error(), url.PathEscape(password))
		})
	}
}

// TestDial_TLS: etcds verifies the members against tls_ca_file and shows
// the client certificate of tls_cert_file and tls_key_file; a member that
// cannot be verified, or that refuses the client, is an error that says
// why (the TLS handshake's) and shows no password.
func TestDial_TLS(t *testing.T) {
	t.Parallel()
	certs := testsvc.NewCerts(t)
	srv := testsvc.StartEtcdTLS(t, certs, true)
	client := "&tls_cert_file=" + certs.CertFile + "&tls_key_file=" + certs.KeyFile
	t.Run("verified, with a client certificate", func(t *testing.T) {
		t.Parallel()
		b := open(t, dsn(t, srv.URL+"?tls_ca_file="+certs.CAFile+client))
		if err := b.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		le := mustAcquire(t, newLocker(t, b, time.Second), "migrate:{tls}", lock.NewOwnerID("a"))
		if err := le.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	for _, c := range []struct{ name, query, want string }{
		{"unknown CA", "?tls_ca_file=" + certs.WrongCAFile + client, "certificate signed by unknown authority"},
		{"system roots", "?tls_cert_file=" + certs.CertFile + "&tls_key_file=" + certs.KeyFile, "certificate signed by unknown authority"},
		{"no client certificate", "?tls_ca_file=" + certs.CAFile, "bad certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Without a user, Dial connects in the background: Ping fails.
			b := open(t, dsn(t, srv.URL+c.query))
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			err := b.Ping(ctx)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ping = %v, want %q in it", err, c.want)
			}
			// With one, Dial fetches a token and fails.
			_, err = Dial(dsn(t, withUser(srv.URL, "root", password)+c.query), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("dial with a password = %v, want %q in it", err, c.want)
			} else {
				noSecret(t, "the error", err.Error(), password)
				noSecret(t, "the error", err.Error(), url.PathEscape(password))
			}
		})
	}
}
