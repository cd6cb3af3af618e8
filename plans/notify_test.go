package plans

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The secrets of the notify tests: none may appear in a problem's text.
const (
	opsToken      = "tok-0ps-S3cret"
	signingSecret = "whsec_c2lnbmluZy1zM2NyZXQ="
	urlPassword   = "hunter2-Pw"
)

var notifyEnv = map[string]string{
	"OPS_TOKEN":                  opsToken,
	"MIGRATE_OPS_WEBHOOK_SECRET": signingSecret,
	"OPS_URL":                    "https://hooks.example.com/migrate?key=" + opsToken,
	"OPS_URL_USER":               "https://ops:" + urlPassword + "@hooks.example.com/migrate",
	"CRLF_TOKEN":                 opsToken + "\r\nX-Injected: 1",
	"EMPTY_SECRET":               "",
	"PAGER":                      "/usr/local/bin/page-oncall",
}

// notifyLookup is testLookup with the variables of notifyEnv.
func notifyLookup(name string) (string, bool) {
	if v, ok := notifyEnv[name]; ok {
		return v, true
	}
	return testLookup(name)
}

// notifyBase is a valid plan without notify; its line 6 is "notify:" in
// the tests, so the first sink starts at line 7, column 5.
const notifyBase = header + "tables: [{name: t, key: [id]}]\n"

// writeCA writes a PEM file of one self-signed CA certificate to dir.
func writeCA(t *testing.T, dir string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ops test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ops-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParse_notify(t *testing.T) {
	ca := writeCA(t, t.TempDir())
	full := notifyBase + fmt.Sprintf(`notify:
  - name: ops
    webhook:
      url: https://hooks.example.com/migrate
      secret_env: MIGRATE_OPS_WEBHOOK_SECRET
      headers:
        Authorization: "Bearer ${OPS_TOKEN}"
        X-Team: db
      ca_file: %s
    events: [shard.halted, shard.taken_over, "plan.*"]
    timeout: 10s
    give_up_after: 24h
  - name: pager
    command: ["${PAGER}", "--team", "db"]
    events: [shard.halted, postload.halted]
`, ca)
	tests := []struct {
		name string
		yaml string
		want []Sink // nil: Plan.Notify must be nil
	}{
		{
			name: "full example",
			yaml: full,
			want: []Sink{
				{
					Name:   "ops",
					Events: []string{"shard.halted", "shard.taken_over", "plan.*"},
					Webhook: &Webhook{
						URL:       "https://hooks.example.com/migrate",
						SecretEnv: "MIGRATE_OPS_WEBHOOK_SECRET",
						Headers:   map[string]string{"Authorization": "Bearer " + opsToken, "X-Team": "db"},
						CAFile:    ca,
					},
					Timeout: 10 * time.Second, GiveUpAfter: 24 * time.Hour, Line: 7, Column: 5,
				},
				{
					Name:    "pager",
					Command: &Command{Argv: []string{"/usr/local/bin/page-oncall", "--team", "db"}},
					Events:  []string{"shard.halted", "postload.halted"},
					Timeout: DefaultSinkTimeout, GiveUpAfter: DefaultSinkGiveUpAfter, Line: 18, Column: 5,
				},
			},
		},
		{
			name: "defaults, one-string command and events, a URL from the environment",
			yaml: notifyBase + "notify:\n  - name: a\n    command: /bin/true\n    events: shard.*\n  - {name: b-2, webhook: {url: '${OPS_URL}'}, timeout: 100ms, give_up_after: 1m}\n",
			want: []Sink{
				{Name: "a", Command: &Command{Argv: []string{"/bin/true"}}, Events: []string{"shard.*"},
					Timeout: DefaultSinkTimeout, GiveUpAfter: DefaultSinkGiveUpAfter, Line: 7, Column: 5},
				{Name: "b-2", Webhook: &Webhook{URL: notifyEnv["OPS_URL"]},
					Timeout: 100 * time.Millisecond, GiveUpAfter: time.Minute, Line: 10, Column: 5},
			},
		},
		{
			name: "largest timeout, every glob form",
			yaml: notifyBase + "notify:\n  - name: c\n    command: [x]\n    events: ['*', 'table.?erified', '[ps]*.done']\n    timeout: 10m\n",
			want: []Sink{{Name: "c", Command: &Command{Argv: []string{"x"}}, Events: []string{"*", "table.?erified", "[ps]*.done"},
				Timeout: 10 * time.Minute, GiveUpAfter: DefaultSinkGiveUpAfter, Line: 7, Column: 5}},
		},
		{name: "no notify", yaml: notifyBase},
		{name: "null notify", yaml: notifyBase + "notify:\n"},
		{name: "empty notify", yaml: notifyBase + "notify: []\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("plan.yaml", []byte(tt.yaml), notifyLookup)
			if err != nil {
				t.Fatalf("Parse:\n%v", err)
			}
			if tt.want == nil && got.Notify != nil {
				t.Fatalf("Notify = %#v, want nil", got.Notify)
			}
			if !reflect.DeepEqual(got.Notify, tt.want) {
				t.Errorf("Notify:\n%s\nwant:\n%s", dumpSinks(got.Notify), dumpSinks(tt.want))
			}
		})
	}
}

// dumpSinks prints sinks in full, header values included: for test
// failures only.
func dumpSinks(ss []Sink) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "  %s events %q timeout %v give_up_after %v at %d:%d", s.Name, s.Events, s.Timeout, s.GiveUpAfter, s.Line, s.Column)
		if s.Webhook != nil {
			w := *s.Webhook
			fmt.Fprintf(&b, " webhook url %q secret_env %q headers %q ca_file %q", w.URL, w.SecretEnv, map[string]string(w.Headers), w.CAFile)
		}
		if s.Command != nil {
			fmt.Fprintf(&b, " command %q", s.Command.Argv)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestParse_notifyInvalid(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "key.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const cmd = "    command: [x]\n"
	tests := []struct {
		name   string
		notify string // after "notify:" on line 6
		want   []string
	}{
		{
			name:   "not a list",
			notify: " ops\n",
			want:   []string{"plan.yaml:6:9: notify must be a list of sinks (- name: ..., with a webhook: or a command:)"},
		},
		{
			name:   "sink not a mapping",
			notify: "\n  - ops\n",
			want:   []string{"plan.yaml:7:5: each sink in notify must be a mapping: a name, and a webhook or a command"},
		},
		{
			name:   "unknown keys",
			notify: "\n  - name: ops\n    evnts: [shard.done]\n    webhook:\n      urll: https://h/x\n      url: https://h/x\n      ca_fil: /x\n      tls: true\n",
			want: []string{
				`plan.yaml:8:5: unknown key "evnts" in sink (did you mean "events"?)`,
				`plan.yaml:10:7: unknown key "urll" in webhook (did you mean "url"?)`,
				`plan.yaml:12:7: unknown key "ca_fil" in webhook (did you mean "ca_file"?)`,
				`plan.yaml:13:7: unknown key "tls" in webhook`,
			},
		},
		{
			name:   "names",
			notify: "\n  - command: [x]\n  - {name: Ops!, command: [x]}\n  - {name: " + strings.Repeat("a", 65) + ", command: [x]}\n  - {name: ops, command: [x]}\n  - {name: ops, command: [y]}\n",
			want: []string{
				"plan.yaml:7:5: sink #1: name is required",
				`plan.yaml:8:12: sink #2: name "Ops!" must match [a-z0-9_-]+ (at most 64 characters)`,
				`plan.yaml:9:12: sink #3: name "` + strings.Repeat("a", 65) + `" must match [a-z0-9_-]+ (at most 64 characters)`,
				`plan.yaml:11:12: sink name "ops" is used twice (first at line 10, column 12); each sink needs its own name`,
			},
		},
		{
			name:   "webhook and command",
			notify: "\n  - name: ops\n    webhook: {url: ftp://h/x}\n    command: [x]\n  - name: none\n    events: [shard.done]\n  - name: nulls\n    webhook:\n    command: ~\n  - {name: rev, command: [x], webhook: {url: 'https://h/x'}}\n",
			want: []string{
				`plan.yaml:8:20: sink ops: webhook url "ftp://h/…" must be an http:// or https:// URL`, // both are read
				"plan.yaml:9:5: sink ops: give either webhook or command, not both",
				"plan.yaml:10:5: sink none: give a webhook or a command",
				"plan.yaml:12:5: sink nulls: give a webhook or a command",
				"plan.yaml:15:31: sink rev: give either webhook or command, not both",
			},
		},
		{
			name:   "webhook shapes",
			notify: "\n  - name: a\n    webhook: https://h/x\n  - name: b\n    webhook: {secret_env: MIGRATE_OPS_WEBHOOK_SECRET}\n  - name: c\n    webhook: {url: ''}\n",
			want: []string{
				"plan.yaml:8:14: sink a: webhook must be a mapping (url:, and optionally secret_env:, headers:, ca_file:)",
				"plan.yaml:10:14: sink b: webhook url is required",
				"plan.yaml:12:20: sink c: webhook url is empty",
			},
		},
		{
			name: "urls",
			notify: "\n  - name: a\n    webhook: {url: 'ftp://h/x?token=abc'}\n  - name: b\n    webhook: {url: 'https://bob:" + urlPassword + "@h.example.com/x?sig=abc#f'}\n" +
				"  - name: c\n    webhook: {url: 'https:///x'}\n  - name: d\n    webhook: {url: 'https://h:port/x'}\n  - name: e\n    webhook: {url: '${OPS_URL_USER}'}\n" +
				"  - name: f\n    webhook: {url: hooks.example.com/migrate}\n  - name: g\n    webhook: {url: 'https://u:" + urlPassword + "/x@h/y'}\n",
			want: []string{
				`plan.yaml:8:20: sink a: webhook url "ftp://h/…" must be an http:// or https:// URL`,
				`plan.yaml:10:20: sink b: webhook url "https://h.example.com/…" must not hold a user or password (it would be printed with the URL): send credentials in headers, e.g. Authorization: "Bearer ${TOKEN}"`,
				`plan.yaml:12:20: sink c: webhook url "https:///…" has no host`,
				`plan.yaml:14:20: sink d: webhook url "https://h:port/…" is not a URL: invalid port ":port" after host`,
				`plan.yaml:16:20: sink e: webhook url "${OPS_URL_USER}" (after expansion) must not hold a user or password (it would be printed with the URL): send credentials in headers, e.g. Authorization: "Bearer ${TOKEN}"`,
				`plan.yaml:18:20: sink f: webhook url "hooks.example.com/migrate" must be an http:// or https:// URL`,
				`plan.yaml:20:20: sink g: webhook url "https://h/…" is not a URL`,
			},
		},
		{
			name: "secret_env",
			notify: "\n  - name: a\n    webhook: {url: 'https://h/x', secret_env: 1BAD}\n  - name: b\n    webhook: {url: 'https://h/x', secret_env: '${MIGRATE_OPS_WEBHOOK_SECRET}'}\n" +
				"  - name: c\n    webhook: {url: 'https://h/x', secret_env: MIGRATE_X}\n  - name: d\n    webhook: {url: 'https://h/x', secret_env: EMPTY_SECRET}\n  - name: e\n    webhook: {url: 'https://h/x', secret_env: ''}\n",
			want: []string{
				`plan.yaml:8:47: sink a: secret_env "1BAD" is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)`,
				`plan.yaml:10:47: sink b: secret_env "${MIGRATE_OPS_WEBHOOK_SECRET}": give the name of the environment variable that holds the secret (secret_env: MIGRATE_OPS_WEBHOOK_SECRET), not its value`,
				"plan.yaml:12:47: sink c: secret_env MIGRATE_X is not set in the environment",
				"plan.yaml:14:47: sink d: secret_env EMPTY_SECRET is empty in the environment",
				"plan.yaml:16:47: sink e: secret_env is empty; leave it out to send unsigned requests",
			},
		},
		{
			name: "headers",
			notify: `
  - name: ops
    webhook:
      url: https://h/x
      headers:
        Bad Header: x
        Content-Type: text/plain
        webhook-signature: v1,abc
        X-A: "1"
        x-a: "2"
        X-List: [a, b]
        Authorization: "Bearer ${NOPE_TOKEN}"
        X-Crlf: "${CRLF_TOKEN}"
        X-Empty: "${EMPTY}"
        X-Fine: "Bearer ${OPS_TOKEN}"
  - name: b
    webhook: {url: 'https://h/x', headers: [Authorization]}
`,
			want: []string{
				`plan.yaml:11:9: sink ops: header name "Bad Header" is not a valid HTTP header name`,
				"plan.yaml:12:9: sink ops: header Content-Type is set by migrate itself (webhook-id, webhook-timestamp, webhook-signature, content-type, user-agent)",
				"plan.yaml:13:9: sink ops: header webhook-signature is set by migrate itself (webhook-id, webhook-timestamp, webhook-signature, content-type, user-agent)",
				"plan.yaml:15:9: sink ops: header x-a is given twice (first at line 14, column 9)",
				"plan.yaml:16:17: sink ops: header X-List must have a single value",
				"plan.yaml:17:24: header Authorization: environment variable NOPE_TOKEN is not set",
				"plan.yaml:18:17: sink ops: header X-Crlf: its value holds a line break or another control character",
				"plan.yaml:19:18: sink ops: header X-Empty is empty after expansion",
				"plan.yaml:22:44: sink b: headers must map header names to values, e.g. {Authorization: \"Bearer ${TOKEN}\"}",
			},
		},
		{
			name: "ca_file",
			notify: "\n  - name: a\n    webhook: {url: 'https://h/x', ca_file: " + filepath.Join(dir, "nope.pem") + "}\n" +
				"  - name: b\n    webhook: {url: 'https://h/x', ca_file: " + dir + "}\n" +
				"  - name: c\n    webhook: {url: 'https://h/x', ca_file: " + notPEM + "}\n" +
				"  - name: d\n    webhook: {url: 'https://h/x', ca_file: ''}\n",
			want: []string{
				fmt.Sprintf("plan.yaml:8:44: sink a: ca_file %q cannot be read: no such file or directory", filepath.Join(dir, "nope.pem")),
				fmt.Sprintf("plan.yaml:10:44: sink b: ca_file %q is a directory, not a PEM file", dir),
				fmt.Sprintf("plan.yaml:12:44: sink c: ca_file %q holds no PEM certificate", notPEM),
				`plan.yaml:14:44: sink d: ca_file "" is empty; leave it out to trust the system's CAs`,
			},
		},
		{
			name:   "commands",
			notify: "\n  - {name: a, command: []}\n  - {name: b, command: ['', x]}\n  - {name: c, command: [x, '', y]}\n  - {name: d, command: {x: y}}\n  - {name: e, command: [x, [y]]}\n  - {name: f, command: ['${NOPE}']}\n",
			want: []string{
				"plan.yaml:7:24: sink a: command is empty: give the program to run and its arguments",
				"plan.yaml:8:25: sink b: command's program is empty",
				"plan.yaml:9:28: sink c: command's argument 1 is empty",
				"plan.yaml:10:24: sink d: command must be a list: the program and its arguments (no shell)",
				"plan.yaml:11:28: sink e: command must be a list: the program and its arguments (no shell)",
				"plan.yaml:12:25: command: environment variable NOPE is not set",
			},
		},
		{
			name:   "events",
			notify: "\n  - name: ops\n" + cmd + "    events: [shard.don, bogus, 'table.*x', '[shard', Shard.Halted]\n  - {name: b, command: [x], events: []}\n",
			want: []string{
				`plan.yaml:9:14: sink ops: unknown event type "shard.don" (did you mean "shard.done"?)`,
				`plan.yaml:9:25: sink ops: unknown event type "bogus" (the types: shard.taken_over, shard.halted, shard.done, postload.halted, postload.done, table.verified, plan.done)`,
				`plan.yaml:9:32: sink ops: events pattern "table.*x" matches no event type (the types: shard.taken_over, shard.halted, shard.done, postload.halted, postload.done, table.verified, plan.done)`,
				`plan.yaml:9:44: sink ops: events pattern "[shard" is not a glob (e.g. "shard.*")`,
				`plan.yaml:9:54: sink ops: unknown event type "Shard.Halted" (did you mean "shard.halted"?)`,
				"plan.yaml:10:37: sink b: events is empty; leave it out to receive every event type",
			},
		},
		{
			name:   "durations",
			notify: "\n  - name: a\n" + cmd + "    timeout: 50ms\n    give_up_after: 30s\n  - name: b\n" + cmd + "    timeout: 11m\n    give_up_after: soon\n",
			want: []string{
				"plan.yaml:9:14: sink a: timeout 50ms is out of range 100ms..10m",
				"plan.yaml:10:20: sink a: give_up_after 30s is too short (at least 1m)",
				"plan.yaml:13:14: sink b: timeout 11m is out of range 100ms..10m",
				`plan.yaml:14:20: give_up_after "soon" is not a duration (want a number with a unit, like 30s or 1m30s)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("plan.yaml", []byte(notifyBase+"notify:"+tt.notify), notifyLookup)
			if err == nil {
				t.Fatalf("no error; notify %s", dumpSinks(p.Notify))
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(tt.want, "\n"))
			}
			assertNoNotifySecret(t, err.Error())
		})
	}
}

// assertNoNotifySecret fails when s holds a secret of notifyEnv.
func assertNoNotifySecret(t *testing.T, s string) {
	t.Helper()
	assertNoSecret(t, s)
	for _, secret := range []string{opsToken, signingSecret, urlPassword, "whsec_", "key="} {
		if strings.Contains(s, secret) {
			t.Errorf("%q leaks the secret %q", s, secret)
		}
	}
}

// TestWebhook_print: whatever prints a plan, a webhook's header values,
// its URL's query and user are not in it.
func TestWebhook_print(t *testing.T) {
	yaml := notifyBase + "notify:\n  - name: ops\n    webhook:\n      url: '${OPS_URL}'\n      secret_env: MIGRATE_OPS_WEBHOOK_SECRET\n      headers: {Authorization: 'Bearer ${OPS_TOKEN}', X-Team: db}\n  - {name: pager, command: [x]}\n"
	p, err := Parse("plan.yaml", []byte(yaml), notifyLookup)
	if err != nil {
		t.Fatal(err)
	}
	w := p.Notify[0].Webhook
	if got, want := w.String(), "webhook https://hooks.example.com/… signed with $MIGRATE_OPS_WEBHOOK_SECRET headers Authorization,X-Team"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	js, err := json.Marshal(w.Headers)
	if err != nil {
		t.Fatal(err)
	}
	wjs, err := json.Marshal(p.Notify[0])
	if err != nil {
		t.Fatal(err)
	}
	printed := fmt.Sprintf("%v|%+v|%#v|%s|%v|%+v|%v|%+v", w, w, w, w, *w, *w, p.Notify, p)
	if !strings.Contains(string(js), opsToken) {
		t.Fatalf("test broken: the header does not hold the token: %s", js)
	}
	for _, out := range []string{printed, string(wjs)} {
		if strings.Contains(out, opsToken) || strings.Contains(out, "Bearer") {
			t.Errorf("a header value or the URL's query is printed:\n%s", out)
		}
	}
	if got, want := string(wjs), `"Webhook":{"url":"https://hooks.example.com/…","secret_env":"MIGRATE_OPS_WEBHOOK_SECRET","headers":["Authorization","X-Team"]}`; !strings.Contains(got, want) {
		t.Errorf("JSON %s, want it to hold %s", got, want)
	}
	if got := []string{p.Notify[0].Kind(), p.Notify[1].Kind()}; !reflect.DeepEqual(got, []string{"webhook", "command"}) {
		t.Errorf("Kind() = %q", got)
	}
}

func TestURLShown(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://hooks.example.com/migrate", "https://hooks.example.com/…"},
		{"https://hooks.example.com/", "https://hooks.example.com"},
		{"https://hooks.example.com", "https://hooks.example.com"},
		{"https://hooks.example.com/migrate?token=abc#frag", "https://hooks.example.com/…"},
		{"https://hooks.slack.com/services/T000/B000/XXXXsecret", "https://hooks.slack.com/…"},
		{"https://user:pw@hooks.example.com:8443/x", "https://hooks.example.com:8443/…"},
		{"https://h/users/@me?x=1", "https://h/…"}, // a path's '@' is not a user's end when the URL parses
		{"https://u:p/w@h/y", "https://h/…"},       // not a URL: any '@' ends a user and password
		{"https://u:p@w@h/y", "https://h/…"},
		{"${OPS_URL}", "${OPS_URL}"},
		{"hooks.example.com/x?k=v", "hooks.example.com/x"},
	}
	for _, tt := range tests {
		if got := URLShown(tt.in); got != tt.want {
			t.Errorf("URLShown(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
