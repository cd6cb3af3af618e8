// Package tlsca reads the CA certificates a TLS connection verifies its
// server against: the one loader of every setting that names a PEM CA
// file (a MySQL DSN's tls-ca, a Redis URL's tls_ca_file).
package tlsca

import (
	"crypto/x509"
	"fmt"
	"os"
)

// Load reads path, a file of PEM CA certificates, into a pool. param names
// the setting that gave the path, for errors: they name it, the path and
// why the file cannot be used, never anything else of the DSN or URL that
// held it. An empty path is CheckPath's error, found without reading.
func Load(param, path string) (*x509.CertPool, error) {
	if err := CheckPath(param, path); err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", param, err) // the path and why: no secret
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s holds no PEM certificate", param, path)
	}
	return roots, nil
}

// CheckPath is Load's error for a path that names no file (""), for a
// caller that checks its settings before any file is read.
func CheckPath(param, path string) error {
	if path == "" {
		return fmt.Errorf("%s is empty; give the path of a PEM CA file", param)
	}
	return nil
}
