package redislock

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/internal/tlsca"
	"github.com/migrate-dev/migrate/plans"
)

// Dial returns a go-redis client for a Redis URL, after the shape its scheme
// names (the query parameters are go-redis's):
//
//	redis://[user:pass@]host:port[/db]                  one server
//	redis+sentinel://[user:pass@]host:port[/db]?master_name=NAME[&addr=host2:port…]
//	                                                    the primary that Sentinel names; host:port
//	                                                    and addr are sentinels, user:pass
//	                                                    authenticates to them and, unless
//	                                                    username=/password= say otherwise, to the servers
//	redis+cluster://[user:pass@]host:port[?addr=host2:port…]
//	                                                    a Redis Cluster, from any of its nodes
//
// rediss… is the same over TLS: go-redis verifies every server's
// certificate (sentinels', nodes' and primaries' too) for the host name of
// the URL, against the system's roots or, given tls_ca_file=/path/ca.pem (a
// parameter of ours, taken out before go-redis reads the URL), against the
// PEM certificates in that file. Every key of one lease shares a hash tag,
// so its scripts run on one cluster node. The client has
// ContextTimeoutEnabled and one retry. Errors never contain the password.
func Dial(url string) (redis.UniversalClient, error) {
	scheme, rest, _ := strings.Cut(url, "://")
	base, kind, _ := strings.Cut(strings.ToLower(scheme), "+")
	rest, caFile, hasCA, err := cutParam(rest, tlsCAParam)
	if err != nil {
		return nil, err
	}
	url = base + "://" + rest
	var roots *x509.CertPool
	if hasCA {
		if base != "rediss" {
			return nil, fmt.Errorf("%s needs TLS: a rediss://, rediss+sentinel:// or rediss+cluster:// URL", tlsCAParam)
		}
		if roots, err = loadRoots(caFile); err != nil {
			return nil, err
		}
	}
	var c redis.UniversalClient
	switch kind {
	case "":
		o, err := redis.ParseURL(url)
		if err != nil {
			return nil, dialError(err, url)
		}
		o.TLSConfig = withRoots(o.TLSConfig, roots)
		o.ContextTimeoutEnabled, o.MaxRetries = true, 1
		c = redis.NewClient(o)
	case "sentinel":
		o, err := redis.ParseFailoverURL(url)
		if err != nil {
			return nil, dialError(err, url)
		}
		if o.MasterName == "" {
			return nil, errors.New("redis+sentinel URL needs master_name=NAME")
		}
		if o.Username == "" && o.Password == "" {
			o.Username, o.Password = o.SentinelUsername, o.SentinelPassword
		}
		o.TLSConfig = withRoots(o.TLSConfig, roots)
		o.ContextTimeoutEnabled, o.MaxRetries = true, 1
		c = redis.NewFailoverClient(o)
	case "cluster":
		o, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, dialError(err, url)
		}
		o.TLSConfig = withRoots(o.TLSConfig, roots)
		o.ContextTimeoutEnabled, o.MaxRetries = true, 1
		c = redis.NewClusterClient(o)
	default:
		return nil, errors.New("redis URL scheme must be redis, redis+sentinel or redis+cluster (rediss… for TLS)")
	}
	return c, nil
}

// tlsCAParam names the URL parameter of a CA file for rediss… URLs.
const tlsCAParam = "tls_ca_file"

// cutParam takes every key=value of name out of the query of rest (a URL
// after "://"), leaving the other parameters as written, and returns the
// value, unescaped. Twice the same parameter is an error.
func cutParam(rest, name string) (out, value string, found bool, err error) {
	base, query, ok := strings.Cut(rest, "?")
	if !ok {
		return rest, "", false, nil
	}
	var kept []string
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if uk, uerr := url.QueryUnescape(k); uerr != nil || uk != name {
			kept = append(kept, kv)
			continue
		}
		if found {
			return "", "", false, fmt.Errorf("%s is given twice", name)
		}
		if value, err = url.QueryUnescape(v); err != nil {
			return "", "", false, fmt.Errorf("%s has an invalid %%-escape", name)
		}
		found = true
	}
	if len(kept) > 0 {
		base += "?" + strings.Join(kept, "&")
	}
	return base, value, found, nil
}

// loadRoots reads a PEM file of CA certificates.
func loadRoots(path string) (*x509.CertPool, error) {
	return tlsca.Load(tlsCAParam, path)
}

// withRoots is go-redis's TLS config (nil without TLS) verifying against
// roots when they are given, at TLS 1.2 or later.
func withRoots(c *tls.Config, roots *x509.CertPool) *tls.Config {
	if c == nil || roots == nil {
		return c
	}
	c = c.Clone()
	c.RootCAs = roots
	c.MinVersion = max(c.MinVersion, tls.VersionTLS12)
	return c
}

// dialError is go-redis's parse error with the URL's passwords taken out
// by plans.Redact, in every form its message may quote them (net/url's
// errors quote the whole URL).
func dialError(err error, url string) error {
	return errors.New(plans.Redact(err.Error(), plans.Secrets(url)))
}
