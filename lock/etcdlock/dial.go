package etcdlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/migrate-dev/migrate/internal/tlsca"
	"github.com/migrate-dev/migrate/plans"
)

// The parameters an etcd DSN takes; every other is refused, so that a
// misspelt one is not silently ignored.
const (
	paramCA   = "tls_ca_file"   // PEM CA certificates to verify the members against, instead of the system's
	paramCert = "tls_cert_file" // a client certificate (PEM), with paramKey
	paramKey  = "tls_key_file"  // its key (PEM)
)

const (
	// dialTimeout bounds what the client does before its first call:
	// fetching an auth token, when the DSN has a user name.
	dialTimeout = 5 * time.Second
	// reconnectMax is the longest the client waits before it tries a
	// member again that it lost: a lease of seconds cannot wait out
	// gRPC's default of two minutes.
	reconnectMax = time.Second
	// probeTimeout bounds the TLS handshake that explains a failed call.
	probeTimeout = 2 * time.Second
)

// Dial opens a Backend on the etcd cluster of dsn:
//
//	etcd://[user:password@]host[:port][,host[:port]…][/prefix]
//	etcds://…[?tls_ca_file=/ca.pem][&tls_cert_file=/c.pem&tls_key_file=/k.pem]
//
// It talks to every host given (port 2379 when none), spreading calls
// over those that answer; the keys of the leases lie under /prefix/
// ("migrate" when none). etcds is TLS, verified against the system's
// roots or the CA certificates of tls_ca_file, with a client certificate
// when tls_cert_file and tls_key_file are given. A user name and password
// authenticate to etcd: its client then fetches a token at once, so Dial
// fails if no member answers within a few seconds; without them, Dial
// connects in the background, and Ping says whether the cluster answers.
// Errors never hold the password. log receives the warnings of WaitFree.
func Dial(dsn plans.DSN, log *slog.Logger) (*Backend, error) {
	if dsn.Engine() != plans.Etcd {
		return nil, fmt.Errorf("lock: %s is not an etcd:// or etcds:// DSN", dsn)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := config(dsn)
	if err != nil {
		return nil, fmt.Errorf("lock: etcd %s: %w", dsn, err)
	}
	diag := func(err error) error { return diagnose(err, cfg.TLS, dsn.Hosts()) }
	cli, err := clientv3.New(cfg)
	if err != nil {
		// etcd's errors name no password; redact all the same, as the
		// client held it.
		msg := plans.Redact(diag(err).Error(), append(plans.Secrets(dsn.Secret()), dsn.Password()))
		return nil, fmt.Errorf("lock: etcd %s: %s", dsn, msg)
	}
	prefix := strings.Trim(dsn.Database(), "/")
	if prefix == "" {
		prefix = "migrate"
	}
	return &Backend{
		cli: cli, prefix: "/" + prefix + "/", name: dsn.String(), log: log, diag: diag,
		held: map[string]holding{}, ended: map[string]ending{}, closed: make(chan struct{}),
	}, nil
}

// config is the client configuration of dsn.
func config(dsn plans.DSN) (clientv3.Config, error) {
	secure := strings.HasPrefix(strings.ToLower(dsn.Secret()), "etcds://")
	q := dsn.Query()
	for k, vs := range q {
		switch k {
		case paramCA, paramCert, paramKey:
			if !secure {
				return clientv3.Config{}, fmt.Errorf("%s needs TLS: an etcds:// DSN", k)
			}
			if len(vs) > 1 {
				return clientv3.Config{}, fmt.Errorf("%s is given twice", k)
			}
		default:
			return clientv3.Config{}, fmt.Errorf("unknown parameter %q (etcd takes %s, %s and %s)", k, paramCA, paramCert, paramKey)
		}
	}
	user, pass := dsn.User(), dsn.Password()
	if q.Has(paramKey) && pass == q.Get(paramKey) {
		pass = "" // DSN.Password falls back on credential-like parameters, and tls_key_file looks like one
	}
	switch {
	case user != "" && pass == "":
		return clientv3.Config{}, errors.New("a user name needs a password (user:password@host)")
	case user == "" && pass != "":
		return clientv3.Config{}, errors.New("a password needs a user name (user:password@host)")
	}
	cfg := clientv3.Config{
		DialTimeout: dialTimeout,
		// Pings find a member that went silent (a partition, not a
		// crash), so calls go to the others; 10s is gRPC's minimum.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Username:             user,
		Password:             pass,
		Logger:               zap.NewNop(), // errors reach the caller; warnings go to log
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMax},
			MinConnectTimeout: dialTimeout,
		})},
	}
	scheme := "http://"
	if secure {
		scheme = "https://"
		tc, err := tlsConfig(q.Get(paramCA), q.Has(paramCA), q.Get(paramCert), q.Get(paramKey))
		if err != nil {
			return clientv3.Config{}, err
		}
		cfg.TLS = tc
	}
	for _, h := range dsn.Hosts() {
		cfg.Endpoints = append(cfg.Endpoints, scheme+h)
	}
	return cfg, nil
}

// tlsConfig verifies the members against the CA certificates in caFile
// (the system's roots when hasCA is false), at TLS 1.2 or later, and shows
// the client certificate of certFile and keyFile when they are given.
func tlsConfig(caFile string, hasCA bool, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if hasCA {
		roots, err := tlsca.Load(paramCA, caFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = roots
	}
	switch {
	case certFile == "" && keyFile == "":
	case certFile == "" || keyFile == "":
		return nil, fmt.Errorf("%s and %s go together", paramCert, paramKey)
	default:
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s %s, %s %s: %w", paramCert, certFile, paramKey, keyFile, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// diagnose explains err, a Dial or a Ping that found no member to talk
// to, by a TLS handshake with each host in turn (probeTimeout for all),
// when the client uses TLS: etcd's client waits for a ready connection
// and reports only that its time ran out, never why the handshakes failed
// (an unknown CA, a certificate for another name, a client certificate
// refused). The other calls are not held up by it.
func diagnose(err error, tc *tls.Config, hosts []string) error {
	if tc == nil || !(errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded) {
		return err
	}
	deadline := time.Now().Add(probeTimeout)
	for _, h := range hosts {
		host, _, _ := net.SplitHostPort(h)
		c := tc.Clone()
		c.ServerName = host
		if herr := handshake(h, c, deadline); herr != nil {
			return fmt.Errorf("%w (a TLS handshake with %s: %v)", err, h, herr)
		}
	}
	return err
}

// handshake is the error of a TLS handshake with addr, or of the first
// read after it: at TLS 1.3 a server that refuses the client's
// certificate says so only then. A member that accepted the handshake
// speaks first (HTTP/2 settings) or stays silent; either is no error.
func handshake(addr string, c *tls.Config, deadline time.Time) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Deadline: deadline}, "tcp", addr, c)
	if err != nil {
		return err
	}
	defer conn.Close()
	read := time.Now().Add(probeTimeout / 4)
	if deadline.Before(read) {
		read = deadline
	}
	_ = conn.SetReadDeadline(read)
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		return err
	}
	return nil
}
