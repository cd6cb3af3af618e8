package plans

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

// parseCluster parses an etcd or ZooKeeper URL, whose authority may list
// several members: scheme://[user[:password]@]host[:port][,host[:port]…][/prefix][?params].
// net/url refuses such a list, so it is split here; a host without a port
// gets def. Passwords are found and redacted as in every other URL
// (secretSpans).
func parseCluster(engine Engine, def, s string) (DSN, error) {
	if strings.Contains(s, "#") {
		return DSN{}, dsnErrorf("%s DSN contains '#'; percent-encode it as %%23 (also in a password)", engine)
	}
	_, rest, _ := strings.Cut(s, "://")
	authority, after := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, after = rest[:i], rest[i:]
	}
	if misplacedAt(after) {
		return DSN{}, dsnErrorf("%s DSN has an '@' after the hosts; percent-encode it as %%40 there, and reserved characters in a password (@ / ? # as %%40 %%2F %%3F %%23)", engine)
	}
	d := DSN{engine: engine, secret: s, redacted: redactSpans(s, secretSpans(s))}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		user, pass, hasPass := strings.Cut(authority[:at], ":")
		var err error
		if d.user, err = url.PathUnescape(user); err != nil {
			return DSN{}, dsnErrorf("%s DSN user name has an invalid %%-escape", engine)
		}
		if hasPass {
			if d.password, err = url.PathUnescape(pass); err != nil {
				return DSN{}, dsnErrorf("%s DSN password has an invalid %%-escape; percent-encode reserved characters in it", engine)
			}
		}
		authority = authority[at+1:]
	}
	var hosts []string
	for _, h := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil { // no port, or a bare IPv6 address
			host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), def
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return DSN{}, dsnErrorf("%s DSN port must be a number 1..65535", engine)
		}
		if host == "" || strings.ContainsAny(host, "/@?[] ") {
			return DSN{}, dsnErrorf("%s DSN has an empty or invalid host in its list (host:port,host:port)", engine)
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	d.hosts = strings.Join(hosts, ",")
	d.host, d.port, _ = net.SplitHostPort(hosts[0])
	path, query, _ := strings.Cut(after, "?")
	prefix, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
	if err != nil {
		return DSN{}, dsnErrorf("%s DSN prefix has an invalid %%-escape", engine)
	}
	d.database, d.rawQuery = strings.TrimSuffix(prefix, "/"), query
	if d.password == "" {
		d.password = queryPassword(query)
	}
	return d, nil
}
