package plans

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSecrets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"postgres userinfo", "postgres://app:s3cret@db:5432/shop?sslmode=disable", []string{"s3cret"}},
		{"percent-encoded userinfo, as written and decoded", "postgres://app:p%40ss%2Fw@db/shop", []string{"p%40ss%2Fw", "p@ss/w"}},
		{"unencoded @ in userinfo", "postgres://app:p@ss@db/shop", []string{"p@ss"}},
		{"password parameters", "postgres://app@db/shop?password=s3cret&sslpassword=k3y", []string{"s3cret", "k3y"}},
		{"query-escaped parameter", "postgres://db/shop?password=a+b%21", []string{"a+b%21", "a b!"}},
		{"parameter behind ';'", "postgres://db/shop?a=1;password=s3cret", []string{"s3cret"}},
		{"mysql url with pass=", "mysql://root:tiger@h:3306/shop?parseTime=true&pass=t2", []string{"tiger", "t2"}},
		{"mysql native", "root:tiger@tcp(127.0.0.1:3306)/shop?parseTime=true", []string{"tiger"}},
		{"mysql native, @ / ( : in the password", "root:t@i/g(e:r@tcp(db:3307)/shop", []string{"t@i/g(e:r"}},
		{"mysql native keeps %-escapes (the driver does)", "root:pw%41@tcp(h)/db?pwd=x1", []string{"pw%41", "x1"}},
		{"mysql native unix socket", "root:pw@unix(/run/mysqld/mysqld.sock)/shop", []string{"pw"}},
		{"rediss password only", "rediss://:rpw@cache:6380", []string{"rpw"}},
		{"redis acl user", "redis://worker:rpw@cache:6379/0", []string{"rpw"}},
		{"redis sentinel", "redis+sentinel://:spw@s1:26379/0?master_name=main&password=mpw&sentinel_password=sp3", []string{"spw", "mpw", "sp3"}},
		{"credential-like parameters", "redis+cluster://n1:7000?auth=a1&token=t1&addr=n2:7000", []string{"a1", "t1"}},
		{"surrounding space", "  redis://:rpw@h:1/0\n", []string{"rpw"}},
		{"longest first, no duplicates", "postgres://u:pw@h/db?password=longer&pass=pw", []string{"longer", "pw"}},
		{"no password", "redis://localhost:6379/0", nil},
		{"user only", "root@tcp(db)/shop", nil},
		{"empty password", "postgres://u:@h/db?password=", nil},
		{"not a DSN", "Sup3rS3cret", nil},
		// Strings ParseDSN refuses: also what other parsers may take for the
		// password, and its pieces a parser's error may quote as host or path.
		{"unencoded '/' in a password", "redis://:ab/cdef@h:1/0", []string{"ab/cdef", "cdef"}},
		{"unencoded '/' quoted as a port", "redis://:s3cret/x@127.0.0.1:1/0", []string{"s3cret/x", "s3cret"}},
		{"unencoded '?' and '#'", "redis://:p?w#x@h", []string{"p?w#x"}},
		{"no scheme", "u:pw@h:5432/db", []string{"pw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Secrets(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("Secrets(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// redactPassword holds characters every escaping changes: URL-reserved ones,
// '%', a space, characters JSON escapes (& < >) and Go quotes (" \).
const redactPassword = `Pw:s/cr@t?x%41&+ =;<>"\!`

// passwordForms are the ways printing may render pw.
func passwordForms(pw string) map[string]string {
	userinfo := strings.TrimPrefix(url.UserPassword("", pw).String(), ":")
	js, _ := json.Marshal(pw)
	jsu, _ := json.Marshal(userinfo)
	return map[string]string{
		"raw": pw, "query-escaped": url.QueryEscape(pw), "path-escaped": url.PathEscape(pw), "userinfo": userinfo,
		"go-quoted": strconv.Quote(pw), "json": string(js), "json userinfo": string(jsu), "go-quoted userinfo": strconv.Quote(userinfo),
	}
}

// TestRedact_Passwords was cmd/migrate's TestSecrets_RedactPasswords, of the
// redaction of a panic's report.
func TestRedact_Passwords(t *testing.T) {
	t.Parallel()
	other := "second-pw"
	for name, form := range passwordForms(redactPassword) {
		in := "before " + form + " middle " + other + " after"
		got := Redact(in, []string{redactPassword, "", other})
		for _, f := range passwordForms(redactPassword) {
			if strings.Contains(got, f) {
				t.Errorf("%s form: %q still holds the password", name, got)
			}
		}
		if !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " middle xxxxx after") || !strings.Contains(got, "xxxxx") {
			t.Errorf("%s form: %q, want the rest of the text kept and the passwords as xxxxx", name, got)
		}
	}
	if got := Redact("nothing to hide", nil); got != "nothing to hide" {
		t.Errorf("no passwords: %q", got)
	}
}

// TestRedact_Forms: each form printing may give a secret becomes one xxxxx,
// the text around it kept.
func TestRedact_Forms(t *testing.T) {
	t.Parallel()
	jsonLog := func(s string) string {
		var b strings.Builder
		noTime := func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
		slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: noTime})).Info(fmt.Sprintf("dial %q", s))
		return b.String()
	}
	jsonOf := func(s string) string { js, _ := json.Marshal(s); return string(js) }
	fixed := func(form string) func(string) string {
		return func(s string) string {
			if s == redactedPassword {
				return s
			}
			return form
		}
	}
	for _, tc := range []struct {
		name, secret string
		print        func(string) string
	}{
		{"lower-case %-escapes", "p/w?d#t", func(s string) string { return strings.ToLower(url.QueryEscape(s)) }},
		{"%-escaped in part", "p/w:d@t", fixed("p%2Fw:d%40t")},
		{"every byte %-escaped", "pw", fixed("%70%77")},
		{"'+' and %20 for a space", "a b c", fixed("a+b%20c")},
		{"Go-quoted, %+q", "pässwörd", strconv.QuoteToASCII},
		{"JSON", redactPassword, jsonOf},
		{"JSON of the Go-quoted", redactPassword, func(s string) string { return jsonOf(strconv.Quote(s)) }},
		{"slog JSON of %q", redactPassword, jsonLog},
		{"Go-quoted twice", redactPassword, func(s string) string { return strconv.Quote(strconv.Quote(s)) }},
		{"Go-quoted userinfo in JSON", redactPassword, func(s string) string { return jsonOf(strconv.Quote(url.UserPassword("u", s).String())) }},
		{"invalid UTF-8, as is", "a\xffb", fixed("a\xffb")},
		{"invalid UTF-8, Go-quoted", "a\xffb", strconv.Quote},
		{"invalid UTF-8, JSON", "a\xffb", jsonOf},
		{"control character", "a\tb", strconv.Quote},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, want := "<"+tc.print(tc.secret)+">", "<"+tc.print(redactedPassword)+">"
			if got := Redact(in, []string{tc.secret}); got != want {
				t.Errorf("Redact(%q) = %q, want %q", in, got, want)
			}
		})
	}
	for _, tc := range []struct {
		name, in string
		secrets  []string
		want     string
	}{
		{"overlapping secrets leave no piece", "a-abcdefghi-b", []string{"abcdef", "defghi"}, "a-xxxxx-b"},
		{"a secret and its own overlap", "aaaa", []string{"aaa"}, "xxxxxa"},
		{"every occurrence", "pw and pw", []string{"pw"}, "xxxxx and xxxxx"},
		{"adjacent secrets", "onetwo", []string{"one", "two"}, "xxxxxxxxxx"},
		{"a secret like the marker", "x said xx", []string{"xx", "said"}, "x xxxxx xxxxx"},
		{"regexp characters are literal", "a.*b a+b", []string{".*", "+"}, "axxxxxb axxxxxb"},
		{"empty secrets ignored", "text", []string{"", ""}, "text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redact(tc.in, tc.secrets); got != tc.want {
				t.Errorf("Redact(%q, %q) = %q, want %q", tc.in, tc.secrets, got, tc.want)
			}
		})
	}
}

// TestRedact_DSNs: for every form of DSN, the secrets Secrets finds take the
// password out of whatever printed the DSN (as is, quoted, in JSON, in
// net/url's error), and redacting the DSN itself gives DSN.Redacted.
func TestRedact_DSNs(t *testing.T) {
	t.Parallel()
	const pw = "Sup3r/S3cr@t%x y"
	enc := url.PathEscape(pw)
	query := url.QueryEscape(pw)
	for _, in := range []string{
		"postgres://app:" + enc + "@db:5432/shop?sslmode=disable",
		"postgresql://app@db/shop?password=" + query,
		"postgres://app@db/shop?sslpassword=" + query,
		"mysql://root:" + enc + "@db:3306/shop?parseTime=true",
		"mysql://root@db:3306/shop?pass=" + query,
		"root:" + pw + "@tcp(db:3306)/shop",
		"root:" + pw + "@tcp(db)/shop?parseTime=true",
		"root@tcp(db:3306)/shop?password=" + query,
		"redis://:" + enc + "@cache:6379/0",
		"rediss://:" + enc + "@cache:6380",
		"rediss://worker:" + enc + "@cache:6380/1",
		"redis+sentinel://s1:26379/0?master_name=m&sentinel_password=" + query,
		"rediss+cluster://:" + enc + "@n1:7000?addr=n2:7000",
	} {
		t.Run(in, func(t *testing.T) {
			d, err := ParseDSN(in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Password() != pw {
				t.Fatalf("Password() = %q, want %q", d.Password(), pw)
			}
			secrets := Secrets(in)
			if got := Redact(in, secrets); got != d.Redacted() {
				t.Errorf("Redact(DSN) = %q, want Redacted() %q", got, d.Redacted())
			}
			js, _ := json.Marshal(in)
			_, uerr := url.Parse("%zz" + in) // url.Error quotes its input
			text := fmt.Sprintf("%s | %q | %+q | %s | %v", in, in, in, js, uerr)
			got := Redact(text, secrets)
			for name, f := range passwordForms(pw) {
				if strings.Contains(got, f) {
					t.Errorf("%s form left in %q", name, got)
				}
			}
			if !strings.Contains(got, "xxxxx") || !strings.Contains(got, d.Host()) {
				t.Errorf("%q: want the passwords as xxxxx and the rest kept", got)
			}
		})
	}
}
