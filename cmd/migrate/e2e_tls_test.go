package main_test

// TLS at every end: a private PostgreSQL with SSL (sslmode=verify-full and
// sslrootcert), a private MariaDB with TLS whose user REQUIRE SSL (tls-ca)
// and a TLS-only Redis (rediss:// with tls_ca_file), all with a test CA;
// then each end with a CA that did not sign its certificate.

import (
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// tlsPasswords are the MariaDB user's and Redis's (PostgreSQL's is the
// private server's own, pg-local-pw): characters every escaping changes.
const (
	tlsMySQLPassword = `My:s/cr@t?x%41&+ =;<>"\!`
	tlsRedisPassword = `Rd:s/cr@t?x%42&+ =;<>"\!`
	tlsPGPassword    = "pg-local-pw"
)

// withQuery returns u with the query parameter key set to value.
func withQuery(t *testing.T, u, key, value string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set(key, value)
	p.RawQuery = q.Encode()
	return p.String()
}

// assertNoPasswords fails when any output holds a password in a usual form.
func assertNoPasswords(t *testing.T, r result) {
	t.Helper()
	for _, pw := range []string{tlsMySQLPassword, tlsRedisPassword, tlsPGPassword} {
		for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw), url.UserPassword("", pw).String()[1:]} {
			if strings.Contains(r.stdout, form) || strings.Contains(r.stderr, form) {
				t.Errorf("output holds a password (%q)\n%s", form, r)
			}
		}
	}
}

// bigRows reads id, payload, n of table in key order.
func bigRows(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT id, payload, n FROM "+table+" ORDER BY id")
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, n int64
		var payload sql.NullString
		if err := rows.Scan(&id, &payload, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d|%q|%v|%d", id, payload.String, payload.Valid, n))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTLS_AllEnds(t *testing.T) {
	t.Parallel()
	certs := testsvc.NewCerts(t)
	pg := testsvc.StartPostgres(t)
	pgURL := testsvc.EnablePostgresTLS(t, pg, certs)
	my := testsvc.StartMariaDB(t, "--ssl-cert="+certs.CertFile, "--ssl-key="+certs.KeyFileFor(t, "mysql"), "--ssl-ca="+certs.CAFile)
	myURL := withQuery(t, my.AddUser(t, "migrate_tls", tlsMySQLPassword, "REQUIRE SSL"), "tls-ca", certs.CAFile)
	rd := testsvc.StartRedisTLS(t, certs, tlsRedisPassword)

	const rows = 20000
	e := bareEnv(t, pgEngine, mysqlEngine)
	e.srcURL, e.dstURL, e.redisURL = pgURL, myURL, rd.URL
	e.srcDB = testsvc.OpenPostgres(t, pgURL)
	seedBig(t, e, "big", rows)
	dst := my.OpenRoot(t, "migrate") // over the socket: the check does not depend on the code under test
	spec := planTable{name: "public.big", key: []string{"id"}, columns: bigSpec("big").colNames()}

	t.Run("copy", func(t *testing.T) {
		r := runMigrate(t, "run", "-p", e.plan(t, spec), "--json", "--instance", "tls-a")
		wantCode(t, r, 0)
		assertNoPasswords(t, r)
		var rep runReport
		decodeJSON(t, r, &rep)
		if rep.RowsWritten != rows || rep.Verify == nil || !rep.Verify.Equal {
			t.Fatalf("rows written %d, verify %+v; want %d rows and equal\n%s", rep.RowsWritten, rep.Verify, rows, r)
		}
		src, got := bigRows(t, e.srcDB, "public.big"), bigRows(t, dst, "big")
		if len(src) != rows || len(got) != rows {
			t.Fatalf("source %d rows, target %d rows, want %d each", len(src), len(got), rows)
		}
		for i := range src {
			if src[i] != got[i] {
				t.Fatalf("row %d: source %q, target %q", i, src[i], got[i])
			}
		}
		var unfenced int64
		if err := dst.QueryRowContext(t.Context(), "SELECT count(*) FROM big WHERE _fence <= 0").Scan(&unfenced); err != nil || unfenced != 0 {
			t.Fatalf("%d target rows without a fence token (%v)", unfenced, err)
		}
		// The user REQUIRE SSL, so every MariaDB session of the run was
		// encrypted; the server counts the handshakes. (pgx never falls
		// back to clear text under verify-full.)
		var accepts string
		if err := dst.QueryRowContext(t.Context(), "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'Ssl_accepts'").Scan(&accepts); err != nil || accepts == "0" {
			t.Errorf("MariaDB Ssl_accepts = %q (%v), want TLS handshakes", accepts, err)
		}

		r = runMigrate(t, "verify", "-p", e.plan(t, spec))
		wantCode(t, r, 0)
		assertNoPasswords(t, r)
	})

	// Each end with a CA that did not sign its certificate: exit 1 before
	// anything is written, the error names the end and the certificate.
	wrongCA := []struct {
		name, end          string
		src, dst, redisURL string
	}{
		{"postgres", "source", withQuery(t, pgURL, "sslrootcert", certs.WrongCAFile), myURL, rd.URL},
		{"mysql", "target", pgURL, withQuery(t, myURL, "tls-ca", certs.WrongCAFile), rd.URL},
		{"redis", "lock", pgURL, myURL, withQuery(t, rd.URL, "tls_ca_file", certs.WrongCAFile)},
	}
	for _, c := range wrongCA {
		t.Run("wrong CA "+c.name, func(t *testing.T) {
			e := bareEnv(t, pgEngine, mysqlEngine)
			e.srcURL, e.dstURL, e.redisURL = c.src, c.dst, c.redisURL
			r := runMigrate(t, "run", "-p", e.plan(t, spec), "--no-verify")
			wantCode(t, r, 1)
			assertNoPasswords(t, r)
			var line string
			for l := range strings.SplitSeq(r.stdout+r.stderr, "\n") {
				if strings.Contains(l, "certificate") && strings.Contains(l, c.end+" ") {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no line names the %s and a certificate\n%s", c.end, r)
			}
			t.Logf("%s", line)
		})
	}

	// sslmode=require against a server without SSL (the shared one) is
	// refused, not quietly sent in clear.
	t.Run("postgres require without SSL", func(t *testing.T) {
		plain := withQuery(t, testsvc.NewPostgresDB(t), "sslmode", "require")
		e := bareEnv(t, pgEngine, mysqlEngine)
		e.srcURL, e.dstURL, e.redisURL = plain, myURL, rd.URL
		r := runMigrate(t, "run", "-p", e.plan(t, spec), "--no-verify")
		wantCode(t, r, 1)
		assertNoPasswords(t, r)
		var line string
		for l := range strings.SplitSeq(r.stdout+r.stderr, "\n") {
			if strings.Contains(l, "source ") && strings.Contains(l, "refused TLS") {
				line = l
			}
		}
		if line == "" {
			t.Fatalf("no line names the source and the refused TLS\n%s", r)
		}
		t.Logf("%s", line)
	})
}
