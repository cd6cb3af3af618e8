package tlsca

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// verify checks the PEM certificate in file against roots.
func verify(t *testing.T, file string, roots *x509.CertPool) error {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s holds no PEM block", file)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost"})
	return err
}

// TestLoad: a PEM CA file becomes a pool; a file that cannot be used is an
// error naming the parameter and the path, and why.
func TestLoad(t *testing.T) {
	certs := testsvc.NewCerts(t)
	for ca, signed := range map[string]bool{certs.CAFile: true, certs.WrongCAFile: false} {
		roots, err := Load("tls-ca", ca)
		if err != nil {
			t.Fatalf("Load(%s): %v", ca, err)
		}
		if err := verify(t, certs.CertFile, roots); (err == nil) != signed {
			t.Errorf("the server certificate against %s: %v, want verified %v", ca, err, signed)
		}
	}
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "none.pem")
	for _, c := range []struct {
		path, want string
		is         error
	}{
		{"", "tls_ca_file is empty; give the path of a PEM CA file", nil},
		{notPEM, "tls_ca_file " + notPEM + " holds no PEM certificate", nil},
		{missing, "tls_ca_file: open " + missing + ": no such file or directory", fs.ErrNotExist},
	} {
		roots, err := Load("tls_ca_file", c.path)
		if err == nil || err.Error() != c.want || roots != nil {
			t.Errorf("Load(%q) = %v, %v; want error %q", c.path, roots, err, c.want)
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("Load(%q): %v is not %v", c.path, err, c.is)
		}
	}
	if err := CheckPath("tls-ca", ""); err == nil || err.Error() != "tls-ca is empty; give the path of a PEM CA file" {
		t.Errorf("CheckPath(\"\") = %v", err)
	}
	if err := CheckPath("tls-ca", missing); err != nil {
		t.Errorf("CheckPath(%s) = %v, want nil: it reads no file", missing, err)
	}
}
