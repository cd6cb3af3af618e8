package plans

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestParseDSN(t *testing.T) {
	tests := []struct {
		name, in                   string
		engine                     Engine
		user, pass, host, port, db string
		redacted                   string
		query                      map[string]string // expected Query().Get values
	}{
		{
			name: "postgres", in: "postgres://app:s3cret@db.example:5432/shop?sslmode=disable",
			engine: Postgres, user: "app", pass: "s3cret", host: "db.example", port: "5432", db: "shop",
			redacted: "postgres://app:xxxxx@db.example:5432/shop?sslmode=disable",
			query:    map[string]string{"sslmode": "disable"},
		},
		{
			name: "postgresql scheme", in: "postgresql://app@localhost/shop",
			engine: Postgres, user: "app", host: "localhost", db: "shop",
			redacted: "postgresql://app@localhost/shop",
		},
		{
			name: "postgres password query parameter", in: "postgres://db:5432/shop?user=app&password=s3cret&sslmode=require",
			engine: Postgres, pass: "s3cret", host: "db", port: "5432", db: "shop",
			redacted: "postgres://db:5432/shop?user=app&password=xxxxx&sslmode=require",
			query:    map[string]string{"user": "app", "password": "s3cret"},
		},
		{
			name: "postgres socket via host parameter", in: "postgres:///shop?host=/var/run/postgresql",
			engine: Postgres, host: "/var/run/postgresql", db: "shop",
			redacted: "postgres:///shop?host=/var/run/postgresql",
		},
		{
			name: "percent-encoded password", in: "postgres://app:p%40ss%2Fw%3Ard%23@db/shop",
			engine: Postgres, user: "app", pass: "p@ss/w:rd#", host: "db", db: "shop",
			redacted: "postgres://app:xxxxx@db/shop",
		},
		{
			name: "password with unreserved specials", in: "postgres://app:a!$&'()*+,;=~b@db/shop",
			engine: Postgres, user: "app", pass: "a!$&'()*+,;=~b", host: "db", db: "shop",
			redacted: "postgres://app:xxxxx@db/shop",
		},
		{
			name: "unencoded @ in password", in: "postgres://app:p@ss@db/shop",
			engine: Postgres, user: "app", pass: "p@ss", host: "db", db: "shop",
			redacted: "postgres://app:xxxxx@db/shop",
		},
		{
			name: "uppercase scheme and ipv6", in: "POSTGRES://app:pw@[::1]:6543/shop",
			engine: Postgres, user: "app", pass: "pw", host: "::1", port: "6543", db: "shop",
			redacted: "POSTGRES://app:xxxxx@[::1]:6543/shop",
		},
		{
			name: "mysql url", in: "mysql://root:tiger@127.0.0.1:3306/shop?parseTime=true&pass=tiger",
			engine: MySQL, user: "root", pass: "tiger", host: "127.0.0.1", port: "3306", db: "shop",
			redacted: "mysql://root:xxxxx@127.0.0.1:3306/shop?parseTime=true&pass=xxxxx",
			query:    map[string]string{"parseTime": "true"},
		},
		{
			name: "mysql native", in: "root:tiger@tcp(127.0.0.1:3306)/shop?parseTime=true",
			engine: MySQL, user: "root", pass: "tiger", host: "127.0.0.1", port: "3306", db: "shop",
			redacted: "root:xxxxx@tcp(127.0.0.1:3306)/shop?parseTime=true",
			query:    map[string]string{"parseTime": "true"},
		},
		{
			name: "mysql native password with @ / ( :", in: "root:t@i/g(e:r@tcp(db:3307)/shop",
			engine: MySQL, user: "root", pass: "t@i/g(e:r", host: "db", port: "3307", db: "shop",
			redacted: "root:xxxxx@tcp(db:3307)/shop",
		},
		{
			name: "mysql native no port", in: "root@tcp(db)/shop",
			engine: MySQL, user: "root", host: "db", db: "shop",
			redacted: "root@tcp(db)/shop",
		},
		{
			name: "mysql native unix socket", in: "root:pw@unix(/run/mysqld/mysqld.sock)/shop",
			engine: MySQL, user: "root", pass: "pw", host: "/run/mysqld/mysqld.sock", db: "shop",
			redacted: "root:xxxxx@unix(/run/mysqld/mysqld.sock)/shop",
		},
		{
			name: "redis password only", in: "redis://:rpw@localhost:6379/2",
			engine: Redis, pass: "rpw", host: "localhost", port: "6379", db: "2",
			redacted: "redis://:xxxxx@localhost:6379/2",
		},
		{
			name: "rediss with acl user", in: "rediss://worker:rpw@cache:6380",
			engine: Redis, user: "worker", pass: "rpw", host: "cache", port: "6380",
			redacted: "rediss://worker:xxxxx@cache:6380",
		},
		{
			name: "redis no auth", in: "redis://localhost:6379/0",
			engine: Redis, host: "localhost", port: "6379", db: "0",
			redacted: "redis://localhost:6379/0",
		},
		{
			name: "redis sentinel", in: "redis+sentinel://:spw@s1:26379/0?master_name=main&addr=s2:26379&password=mpw",
			engine: Redis, pass: "spw", host: "s1", port: "26379", db: "0",
			redacted: "redis+sentinel://:xxxxx@s1:26379/0?master_name=main&addr=s2:26379&password=xxxxx",
		},
		{
			name: "credential-like parameters", in: "redis+sentinel://s1:26379/0?master_name=m&sentinel_password=sp&auth=a1&token=t1&SentinelPassword=sp2",
			engine: Redis, pass: "sp", host: "s1", port: "26379", db: "0",
			redacted: "redis+sentinel://s1:26379/0?master_name=m&sentinel_password=xxxxx&auth=xxxxx&token=xxxxx&SentinelPassword=xxxxx",
		},
		{
			name: "redis cluster", in: "rediss+cluster://worker:rpw@n1:7000?addr=n2:7000&addr=n3:7000",
			engine: Redis, user: "worker", pass: "rpw", host: "n1", port: "7000",
			redacted: "rediss+cluster://worker:xxxxx@n1:7000?addr=n2:7000&addr=n3:7000",
		},
		{
			name: "surrounding space trimmed", in: "  redis://localhost:6379/0\n",
			engine: Redis, host: "localhost", port: "6379", db: "0",
			redacted: "redis://localhost:6379/0",
		},
		{
			name: "semicolon does not hide a password", in: "postgres://db/shop?a=1;password=s3cret",
			engine: Postgres, pass: "s3cret", host: "db", db: "shop",
			redacted: "postgres://db/shop?a=1;password=xxxxx",
		},
		{
			name: "empty password still marked", in: "postgres://app:@db/shop?password=&sslmode=disable",
			engine: Postgres, user: "app", host: "db", db: "shop",
			redacted: "postgres://app:xxxxx@db/shop?password=xxxxx&sslmode=disable",
		},
		{
			name: "mysql native empty password and pwd parameter", in: "root:@tcp(db)/shop?pwd=s3cret;tls=true",
			engine: MySQL, user: "root", pass: "s3cret", host: "db", db: "shop",
			redacted: "root:xxxxx@tcp(db)/shop?pwd=xxxxx;tls=true",
		},
		{
			name: "encoded password key", in: "postgres://db/shop?PASS%57ORD=s3cret",
			engine: Postgres, pass: "s3cret", host: "db", db: "shop",
			redacted: "postgres://db/shop?PASS%57ORD=xxxxx",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseDSN(tt.in)
			if err != nil {
				t.Fatalf("ParseDSN: %v", err)
			}
			got := [...]string{string(d.Engine()), d.User(), d.Password(), d.Host(), d.Port(), d.Database(), d.Redacted()}
			want := [...]string{string(tt.engine), tt.user, tt.pass, tt.host, tt.port, tt.db, tt.redacted}
			if got != want {
				t.Errorf("got  %q\nwant %q", got, want)
			}
			if d.Secret() != strings.TrimSpace(tt.in) {
				t.Errorf("Secret() = %q, want the input", d.Secret())
			}
			if d.IsZero() {
				t.Error("IsZero() = true for a parsed DSN")
			}
			if d.Native() != strings.Contains(tt.in, "@tcp(") && d.Native() != strings.Contains(tt.in, "@unix(") {
				t.Errorf("Native() = %v", d.Native())
			}
			for k, v := range tt.query {
				if got := d.Query().Get(k); got != v {
					t.Errorf("Query().Get(%q) = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestParseDSN_errors(t *testing.T) {
	const pw = "Sup3rS3cret"
	tests := []struct{ name, in, want string }{
		{"empty", "  ", "invalid DSN: empty"},
		{"unknown scheme", "postgress://u:" + pw + "@h/db", `unsupported scheme "postgress"`},
		{"http", "http://u:" + pw + "@h/db", `unsupported scheme "http"`},
		{"no scheme", "u:" + pw + "@h:5432/db", "want a postgres://"},
		{"plain words", pw, "want a postgres://"},
		{"native bad net", "u:" + pw + "@udp(h:1)/db", "want a postgres://"},
		{"native empty addr", "u:" + pw + "@tcp()/db", "no valid address"},
		{"native bad port", "u:" + pw + "@tcp(h:99999)/db", "port must be a number 1..65535"},
		{"unencoded slash in password", "postgres://u:a/" + pw + "@h/db", "has an '@' after the host"},
		{"unencoded question mark in password", "postgres://u:12?" + pw + "@h/db", "has an '@' after the host"},
		{"unencoded hash in password", "postgres://u:12#" + pw + "@h/db", "contains '#'"},
		{"bad port", "mysql://u:" + pw + "@h:port/db", "not a valid URL: invalid port"},
		{"port out of range", "mysql://u:" + pw + "@h:70000/db", "port must be a number 1..65535"},
		{"no host", "mysql://u:" + pw + "@/db", "mysql DSN has no host"},
		{"redis no host", "redis://:" + pw + "@:6379", "redis DSN has no host"},
		{"redis bad db", "redis://:" + pw + "@h:6379/cache", "database must be a number"},
		{"control character", "postgres://u:" + pw + "\x00@h/db", "control characters"},
		{"bad escape", "postgres://u:" + pw + "%zz@h/db", "not a valid URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDSN(tt.in)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("error %q leaks the password", err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
			}
		})
	}
}

func TestDSN_redaction(t *testing.T) {
	const pw = "Sup3rS3cret"
	inputs := []string{
		"postgres://app:" + pw + "@db:5432/shop?sslmode=disable",
		"postgres://app@db:5432/shop?password=" + pw,
		"postgres://app@db:5432/shop?sslpassword=" + pw,
		"mysql://root:" + pw + "@db:3306/shop",
		"mysql://root@db:3306/shop?pass=" + pw,
		"root:" + pw + "@tcp(db:3306)/shop",
		"redis://:" + pw + "@cache:6379/0",
		"rediss://user:" + pw + "@cache:6379",
	}
	for _, in := range inputs {
		d, err := ParseDSN(in)
		if err != nil {
			t.Fatalf("ParseDSN(%q): %v", in, err)
		}
		t.Run(d.Redacted(), func(t *testing.T) {
			if d.Password() != pw {
				t.Fatalf("Password() = %q, want %q", d.Password(), pw)
			}
			if !strings.Contains(d.Secret(), pw) {
				t.Fatalf("Secret() lost the password")
			}
			holder := struct {
				DSN  DSN
				Ptr  *DSN
				List []DSN
			}{d, &d, []DSN{d}}
			var logs bytes.Buffer
			slog.New(slog.NewTextHandler(&logs, nil)).Info("msg", "dsn", d, "holder", holder)
			slog.New(slog.NewJSONHandler(&logs, nil)).Info("msg", "dsn", d, "holder", holder)
			js, err := json.Marshal(holder)
			if err != nil {
				t.Fatal(err)
			}
			outputs := map[string]string{
				"String":   d.String(),
				"GoString": d.GoString(),
				"slog":     logs.String(),
				"json":     string(js),
			}
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.4s", "%T"} {
				outputs["Sprintf "+verb] = fmt.Sprintf(verb, d)
				outputs["Sprintf struct "+verb] = fmt.Sprintf(verb, holder)
			}
			outputs["Sprint"] = fmt.Sprint(d, holder)
			outputs["Sprintln"] = fmt.Sprintln(d, holder)
			for name, out := range outputs {
				if strings.Contains(out, pw) || strings.Contains(strings.ToLower(out), strings.ToLower(fmt.Sprintf("%x", pw))) {
					t.Errorf("%s leaks the password: %s", name, out)
				}
			}
			if got, want := fmt.Sprintf("%v", d), d.Redacted(); got != want {
				t.Errorf("%%v = %q, want %q", got, want)
			}
			if !strings.Contains(d.Redacted(), redactedPassword) {
				t.Errorf("Redacted() = %q has no %q", d.Redacted(), redactedPassword)
			}
		})
	}
}

func TestDSN_zero(t *testing.T) {
	var d DSN
	if !d.IsZero() || d.Engine() != "" || d.String() != "" || d.Secret() != "" {
		t.Errorf("zero DSN: IsZero=%v Engine=%q String=%q", d.IsZero(), d.Engine(), d.String())
	}
	js, err := json.Marshal(d)
	if err != nil || string(js) != `""` {
		t.Errorf("MarshalJSON = %s, %v", js, err)
	}
	if len(d.Query()) != 0 {
		t.Errorf("Query() = %v", d.Query())
	}
}

func TestDSN_comparable(t *testing.T) {
	a, _ := ParseDSN("postgres://u:p@h/db")
	b, _ := ParseDSN("postgres://u:p@h/db")
	c, _ := ParseDSN("postgres://u:q@h/db")
	if a != b || a == c {
		t.Errorf("a==b %v, a==c %v", a == b, a == c)
	}
}
