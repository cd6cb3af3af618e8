package mystream

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/go-sql-driver/mysql"

	"github.com/migrate-dev/migrate/internal/tlsca"
	"github.com/migrate-dev/migrate/plans"
)

// syncerConfig is the binlog connection's address, user and TLS from dsn,
// read the way dialect.MySQL reads them for the pool: a mysql:// URL or a
// go-sql-driver DSN, the driver's tls parameter, and tls-ca=FILE (TLS 1.2+
// verified against that CA for the DSN's host). The password is only ever
// in the returned config.
func syncerConfig(dsn plans.DSN) (replication.BinlogSyncerConfig, error) {
	var cfg *mysql.Config
	if dsn.Native() {
		c, err := mysql.ParseDSN(dsn.Secret())
		if err != nil {
			return replication.BinlogSyncerConfig{}, fmt.Errorf("mysql DSN %s: invalid", dsn)
		}
		cfg = c
	} else {
		c, err := mysql.ParseDSN("/?" + dsn.Query().Encode())
		if err != nil {
			return replication.BinlogSyncerConfig{}, fmt.Errorf("mysql DSN %s: invalid parameters", dsn)
		}
		cfg = c
		cfg.User, cfg.Passwd = dsn.User(), dsn.Password()
		port := dsn.Port()
		if port == "" {
			port = "3306"
		}
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(dsn.Host(), port)
		if cfg.TLS != nil && !cfg.TLS.InsecureSkipVerify {
			cfg.TLS.ServerName = dsn.Host()
		}
	}
	switch cfg.Net {
	case "tcp", "tcp4", "tcp6":
	default:
		return replication.BinlogSyncerConfig{}, fmt.Errorf("mysql DSN %s: the binlog reader needs a TCP address, not %s", dsn, cfg.Net)
	}
	host, portText, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		host, portText = cfg.Addr, "3306"
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return replication.BinlogSyncerConfig{}, fmt.Errorf("mysql DSN %s: invalid port", dsn)
	}
	out := replication.BinlogSyncerConfig{Host: host, Port: uint16(port), User: cfg.User, Password: cfg.Passwd, TLSConfig: cfg.TLS}
	if path, ok := cfg.Params["tls-ca"]; ok {
		switch cfg.TLSConfig {
		case "", "true":
		default:
			return replication.BinlogSyncerConfig{}, fmt.Errorf("mysql DSN %s: tls-ca goes with tls=true or no tls parameter", dsn)
		}
		if err := tlsca.CheckPath("tls-ca", path); err != nil {
			return replication.BinlogSyncerConfig{}, fmt.Errorf("mysql DSN %s: %w", dsn, err)
		}
		roots, err := tlsca.Load("tls-ca", path)
		if err != nil {
			return replication.BinlogSyncerConfig{}, fmt.Errorf("mysql DSN %s: %w", dsn, err)
		}
		out.TLSConfig = &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12}
	}
	return out, nil
}
