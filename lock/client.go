package lock

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
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
// rediss… is the same over TLS. Every key of one lease shares a hash tag, so
// its scripts run on one cluster node. The client has ContextTimeoutEnabled
// and one retry. Errors never contain the password.
func Dial(url string) (redis.UniversalClient, error) {
	scheme, rest, _ := strings.Cut(url, "://")
	base, kind, _ := strings.Cut(strings.ToLower(scheme), "+")
	url = base + "://" + rest
	var c redis.UniversalClient
	switch kind {
	case "":
		o, err := redis.ParseURL(url)
		if err != nil {
			return nil, dialError(err, url)
		}
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
		o.ContextTimeoutEnabled, o.MaxRetries = true, 1
		c = redis.NewFailoverClient(o)
	case "cluster":
		o, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, dialError(err, url)
		}
		o.ContextTimeoutEnabled, o.MaxRetries = true, 1
		c = redis.NewClusterClient(o)
	default:
		return nil, errors.New("redis URL scheme must be redis, redis+sentinel or redis+cluster (rediss… for TLS)")
	}
	return c, nil
}

// dialError is go-redis's parse error with any password in the URL taken
// out (its messages quote parameter names and addresses, but be sure).
func dialError(err error, url string) error {
	msg := err.Error()
	for _, secret := range secrets(url) {
		msg = strings.ReplaceAll(msg, secret, "xxxxx")
	}
	return errors.New(msg)
}

// secrets are the values in url that may be passwords: the userinfo's and
// those of password= parameters.
func secrets(url string) []string {
	var out []string
	_, rest, _ := strings.Cut(url, "://")
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		if _, pw, ok := strings.Cut(rest[:at], ":"); ok && pw != "" {
			out = append(out, pw)
		}
	}
	_, query, _ := strings.Cut(rest, "?")
	for _, kv := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		if k, v, _ := strings.Cut(kv, "="); strings.Contains(strings.ToLower(k), "pass") && v != "" {
			out = append(out, v)
		}
	}
	return out
}
