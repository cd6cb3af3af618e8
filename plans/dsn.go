package plans

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Engine is the kind of service a DSN points at.
type Engine string

// The engines a plan can name.
const (
	Postgres  Engine = "postgres"
	MySQL     Engine = "mysql"
	Redis     Engine = "redis"
	Etcd      Engine = "etcd"
	ZooKeeper Engine = "zookeeper"
)

// redactedPassword replaces every password in printed DSNs (the same marker
// as net/url's URL.Redacted).
const redactedPassword = "xxxxx"

// DSN is a parsed connection string. Every way of printing it (String,
// Format, LogValue, MarshalJSON, GoString) gives the redacted form, with
// passwords replaced by "xxxxx", so printing one by accident never leaks a
// secret. Secret returns the original string for handing to a driver.
//
// The zero DSN means "not set". DSN values are comparable.
type DSN struct {
	engine   Engine
	secret   string // the input, trimmed of surrounding space
	redacted string
	native   bool // go-sql-driver form user:pass@tcp(host:port)/db
	user     string
	password string
	host     string
	port     string
	database string
	rawQuery string
	hosts    string // etcd, ZooKeeper: every host:port, comma-separated
}

// dsnError is a DSN problem. Its text never holds any part of the input but
// the scheme, so it cannot leak a password, wherever the password was put.
type dsnError struct{ msg string }

func (e *dsnError) Error() string        { return "invalid DSN: " + e.msg }
func (e *dsnError) Is(target error) bool { return target == ErrInvalid }

func dsnErrorf(format string, args ...any) error {
	return &dsnError{msg: fmt.Sprintf(format, args...)}
}

// ParseDSN parses a connection string: a postgres://, postgresql://, mysql://,
// redis:// or rediss:// URL (also redis+sentinel://, redis+cluster://), an
// etcd:// or etcds:// URL or a zk:// URL (several hosts, comma-separated:
// etcd://h1:2379,h2:2379/prefix), or the go-sql-driver/mysql form
// user:pass@tcp(host:port)/db?params (engine MySQL; also unix(/path)).
// Reserved characters in a URL password must be percent-encoded. Errors match
// ErrInvalid and never contain the password.
func ParseDSN(s string) (DSN, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DSN{}, dsnErrorf("empty")
	}
	if strings.ContainsFunc(s, isControl) {
		return DSN{}, dsnErrorf("contains control characters")
	}
	scheme, _, ok := strings.Cut(s, "://")
	if !ok || !isSchemeToken(scheme) {
		d, err := parseNative(s)
		if err != nil {
			return DSN{}, err
		}
		return d, nil
	}
	var engine Engine
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		engine = Postgres
	case "mysql":
		engine = MySQL
	case "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster":
		engine = Redis
	case "etcd", "etcds":
		return parseCluster(Etcd, "2379", s)
	case "zk", "zookeeper":
		return parseCluster(ZooKeeper, "2181", s)
	default:
		return DSN{}, dsnErrorf("unsupported scheme %q (want postgres://, postgresql://, mysql://, redis://, rediss://, redis+sentinel://, redis+cluster://, etcd://, etcds:// or zk://)", scheme)
	}
	return parseURL(engine, s)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func isSchemeToken(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

func parseURL(engine Engine, s string) (DSN, error) {
	_, rest, _ := strings.Cut(s, "://")
	// Refuse shapes where a badly encoded password would land outside the
	// userinfo, where it could not be redacted.
	if strings.Contains(s, "#") {
		return DSN{}, dsnErrorf("%s DSN contains '#'; percent-encode it as %%23 (also in a password)", engine)
	}
	after := ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		after = rest[i:]
	}
	if misplacedAt(after) {
		return DSN{}, dsnErrorf("%s DSN has an '@' after the host; percent-encode it as %%40 there, and reserved characters in a password (@ / ? # as %%40 %%2F %%3F %%23)", engine)
	}
	u, err := url.Parse(s)
	if err != nil {
		return DSN{}, dsnErrorf("%s DSN is not a valid URL: %s; percent-encode reserved characters in the password", engine, urlProblem(err))
	}
	d := DSN{engine: engine, secret: s, redacted: redactSpans(s, secretSpans(s)), rawQuery: u.RawQuery}
	if u.User != nil {
		d.user = u.User.Username()
		d.password, _ = u.User.Password()
	}
	d.host, d.port = u.Hostname(), u.Port()
	d.database = strings.TrimPrefix(u.Path, "/")
	if d.password == "" {
		d.password = queryPassword(u.RawQuery)
	}

	if d.port != "" {
		if n, err := strconv.Atoi(d.port); err != nil || n < 1 || n > 65535 {
			return DSN{}, dsnErrorf("%s DSN port must be a number 1..65535", engine)
		}
	}
	if d.host == "" && engine == Postgres {
		d.host = queryHost(u.RawQuery)
	}
	if d.host == "" {
		return DSN{}, dsnErrorf("%s DSN has no host", engine)
	}
	if engine == Redis && d.database != "" {
		if n, err := strconv.Atoi(d.database); err != nil || n < 0 {
			return DSN{}, dsnErrorf("redis DSN database must be a number (redis://host:port/0)")
		}
	}
	return d, nil
}

// misplacedAt reports an '@' after the host that is not inside the value of
// a password parameter: the sign of a password with an unencoded '/' or '?'
// whose tail would otherwise print unredacted.
func misplacedAt(after string) bool {
	path, query, _ := strings.Cut(after, "?")
	if strings.Contains(path, "@") {
		return true
	}
	bad := false
	splitQuery(query, func(k, v string) {
		if strings.Contains(k, "@") || strings.Contains(v, "@") && !isSecretParam(k) {
			bad = true
		}
	})
	return bad
}

// urlProblem names what net/url disliked without quoting it: url.Error
// messages quote the input, which may hold a password.
func urlProblem(err error) string {
	msg := err.Error()
	for _, p := range []string{"invalid port", "invalid character", "invalid URL escape", "invalid userinfo", "missing ']'", "invalid IP-literal"} {
		if strings.Contains(msg, p) {
			return p
		}
	}
	return "malformed"
}

// parseNative parses the go-sql-driver/mysql form
// [user[:password]@]net(addr)/dbname[?params], splitting it the way the
// driver does (last '/', then last '@' before it, then first ':').
func parseNative(s string) (DSN, error) {
	bad := dsnErrorf("want a postgres://, postgresql://, mysql://, redis:// or rediss:// URL, or user:pass@tcp(host:port)/db")
	slash := strings.LastIndex(s, "/")
	if slash < 0 {
		return DSN{}, bad
	}
	left, right := s[:slash], s[slash+1:]
	d := DSN{engine: MySQL, secret: s, redacted: redactSpans(s, secretSpans(s)), native: true}
	proto := left
	if at := strings.LastIndex(left, "@"); at >= 0 {
		proto = left[at+1:]
		d.user, d.password, _ = strings.Cut(left[:at], ":")
	}
	netw, addr, ok := strings.Cut(proto, "(")
	if !ok || !strings.HasSuffix(addr, ")") {
		return DSN{}, bad
	}
	addr = strings.TrimSuffix(addr, ")")
	switch netw {
	case "tcp", "tcp4", "tcp6":
		if addr == "" || strings.ContainsAny(addr, "()") {
			return DSN{}, dsnErrorf("mysql DSN has no valid address in %s(...)", netw)
		}
		if h, p, err := net.SplitHostPort(addr); err == nil {
			d.host, d.port = h, p
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return DSN{}, dsnErrorf("mysql DSN port must be a number 1..65535")
			}
		} else {
			d.host = addr
		}
	case "unix":
		if addr == "" {
			return DSN{}, dsnErrorf("mysql DSN has no socket path in unix(...)")
		}
		d.host = addr
	default:
		return DSN{}, bad
	}
	db, query, hasQuery := strings.Cut(right, "?")
	name, err := url.PathUnescape(db)
	if err != nil {
		return DSN{}, dsnErrorf("mysql DSN database name has an invalid %%-escape")
	}
	d.database = name
	if hasQuery {
		d.rawQuery = query
	}
	if d.password == "" {
		d.password = queryPassword(d.rawQuery)
	}
	return d, nil
}

// secretParams are query parameters whose values are redacted.
var secretParams = map[string]bool{"password": true, "pass": true, "passwd": true, "pwd": true, "sslpassword": true}

// splitQuery calls fn for every key=value segment of a raw query, splitting
// on both '&' and ';' (a ';' is not a separator to net/url, but redaction
// must not miss a password behind one).
func splitQuery(raw string, fn func(key, value string)) {
	for raw != "" {
		seg := raw
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			seg, raw = raw[:i], raw[i+1:]
		} else {
			raw = ""
		}
		k, v, _ := strings.Cut(seg, "=")
		fn(k, v)
	}
}

func isSecretParam(rawKey string) bool {
	k, err := url.QueryUnescape(rawKey)
	if err != nil {
		k = rawKey
	}
	k = strings.ToLower(strings.TrimSpace(k))
	if secretParams[k] {
		return true
	}
	if strings.HasSuffix(k, "_file") {
		return false // a path to a file (tls_key_file, tls_ca_file), not the secret in it
	}
	// Any other parameter that looks like it holds a credential
	// (sentinel_password, auth, token, secret, …): better an odd parameter
	// redacted than a secret printed.
	for _, w := range []string{"pass", "secret", "token", "auth", "pwd", "key"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

func queryPassword(raw string) string {
	var pw string
	splitQuery(raw, func(k, v string) {
		if pw == "" && isSecretParam(k) {
			if u, err := url.QueryUnescape(v); err == nil {
				v = u
			}
			pw = v
		}
	})
	return pw
}

func queryHost(raw string) string {
	var host string
	splitQuery(raw, func(k, v string) {
		if host == "" && k == "host" {
			if u, err := url.QueryUnescape(v); err == nil {
				v = u
			}
			host = v
		}
	})
	return host
}

// Engine returns the service kind: Postgres, MySQL, Redis, Etcd or ZooKeeper.
func (d DSN) Engine() Engine { return d.engine }

// IsZero reports whether d is the zero DSN (not set).
func (d DSN) IsZero() bool { return d == DSN{} }

// Redacted returns the DSN as written, with every password replaced by
// "xxxxx" ("" for the zero DSN): the userinfo's and the values of
// credential-like parameters, in their places (the ones Secrets returns).
func (d DSN) Redacted() string { return d.redacted }

// String returns the redacted DSN.
func (d DSN) String() string { return d.redacted }

// GoString returns the redacted DSN in Go syntax, for %#v.
func (d DSN) GoString() string { return "plans.DSN(" + strconv.Quote(d.redacted) + ")" }

// Format prints the redacted DSN for every verb, so even %d or %x of a
// struct holding a DSN cannot reach the secret.
func (d DSN) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, d.GoString())
		return
	}
	_, _ = fmt.Fprintf(f, fmt.FormatString(f, verb), d.redacted)
}

// LogValue makes slog log the redacted DSN.
func (d DSN) LogValue() slog.Value { return slog.StringValue(d.redacted) }

// MarshalJSON encodes the redacted DSN as a JSON string.
func (d DSN) MarshalJSON() ([]byte, error) { return json.Marshal(d.redacted) }

// Secret returns the connection string as given, password included. Hand it
// to a driver; never print or log it.
func (d DSN) Secret() string { return d.secret }

// Password returns the password (from the userinfo, or else from a
// password= or pass= query parameter), decoded; "" when there is none. It
// lets tests and log scrubbers check that it never leaks.
func (d DSN) Password() string { return d.password }

// Host returns the host name (or the socket path for unix(...) and a
// postgres host= parameter); "" for the zero DSN.
func (d DSN) Host() string { return d.host }

// Port returns the port as written; "" when none is given (the driver's
// default applies).
func (d DSN) Port() string { return d.port }

// Database returns the database name (the Redis database number for Redis,
// the key prefix for etcd and ZooKeeper, without its first '/'); "" when
// none is given.
func (d DSN) Database() string { return d.database }

// User returns the user name; "" when none is given.
func (d DSN) User() string { return d.user }

// Query returns the query parameters (driver options). Values the standard
// parser rejects are left out. The map is a fresh copy.
func (d DSN) Query() url.Values {
	v, _ := url.ParseQuery(d.rawQuery)
	return v
}

// Native reports whether the DSN was given in the go-sql-driver/mysql form
// (user:pass@tcp(host:port)/db) rather than as a URL; Secret is then in that
// form and can be handed to mysql.ParseDSN as is.
func (d DSN) Native() bool { return d.native }

// Hosts returns every host:port of an etcd or ZooKeeper DSN, each with the
// service's default port when the DSN gave none; nil for other engines.
func (d DSN) Hosts() []string {
	if d.hosts == "" {
		return nil
	}
	return strings.Split(d.hosts, ",")
}
