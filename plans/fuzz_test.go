package plans

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fuzzSecret is the password planted in the fuzzers' connection strings. Its
// '!' cannot be part of a URL scheme, so no error may quote it.
const fuzzSecret = "S3cr!t~Pw"

var fuzzEnv = map[string]string{
	"SOURCE": "postgres://app:" + fuzzSecret + "@pg:5432/shop?sslmode=disable",
	"TARGET": "mysql://root:" + fuzzSecret + "@maria:3306/shop",
	"NATIVE": "root:" + fuzzSecret + "@tcp(maria:3306)/shop",
	"REDIS":  "redis://:" + fuzzSecret + "@cache:6379/0",
	"QUERY":  "postgres://pg/shop?password=" + fuzzSecret,
	"TABLE":  "public.orders",
	"NUM":    "12",
	"EMPTY":  "",
}

func fuzzLookup(name string) (string, bool) {
	v, ok := fuzzEnv[name]
	return v, ok
}

func FuzzParse(f *testing.F) {
	seeds := []string{
		"name: orders-move\nsource: ${SOURCE}\ntarget: ${TARGET}\nredis: ${REDIS}\nlease_ttl: 30s\nbatch_size: 1000\ntables:\n  - name: public.orders\n    target: orders\n    key: [id]\n    columns: [id, ext_id, customer]\n    shards: 2\n",
		"name: x\nsource: ${QUERY}\ntarget: ${NATIVE}\nredis: ${REDIS}\nfence_column: _f\nmax_retries: 0\ntables:\n  - {name: '${TABLE}', key: [a, b], shards: '${NUM}'}\n  - {name: t, target: s.t, key: k}\n",
		"name: x\nsource: postgres://u:${EMPTY}@h/${SOURCE}\ntarget: ${TARGET}x\nredis: redis://${REDIS}\ntables: [{name: a, key: [id], shard: 1}]\n",
		"name: Bad\nsource: x${SOURCE}\ntarget: ${NOPE}\nredis: ${REDIS\nlease_ttl: 5\nbatch_size: lots\ntables:\n  - name: a.b.c\n    key: [id, id, '']\n    columns: [x]\n  - name: a.b.c\n    key: []\n",
		"name: &n x\nsource: *n\ntables: *n\n<<: {a: 1}\n",
		"- a\n- b\n",
		"name: x\n---\nname: y\n",
		"name: [x\n",
		"",
		"tables:\n  - name: t\n    key: [\"$${x}\", $y]\n",
		"name: x\nsource: ${SOURCE}\ntarget: ${TARGET}\ntables: [{name: t, key: id}]\nnotify:\n  - name: ops\n    webhook:\n      url: https://h.example.com/x?k=${NUM}\n      headers: {Authorization: \"Bearer ${SOURCE}\", X-A: '${EMPTY}'}\n    events: [shard.halted, \"plan.*\"]\n    timeout: 5s\n  - {name: pager, command: [pg, --team, db], give_up_after: 1h}\n",
		"name: x\nsource: ${SOURCE}\ntarget: ${TARGET}\nnotify:\n  - {name: A, webhook: {url: 'https://u:${SOURCE}@h/x', secret_env: NOPE, headers: {content-type: x}}, command: y, events: [shard.don, '[x']}\n  - ops\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data, fuzzLookup)
		if err != nil {
			if p != nil {
				t.Fatal("plan and error both returned")
			}
			checkParseError(t, data, err)
			return
		}
		checkPlan(t, p)
		for _, d := range []DSN{p.Source, p.Target, p.Lock} {
			printed := d.Redacted() + fmt.Sprintf("%v %+v %#v %s", d, d, d, d)
			js, _ := json.Marshal(d)
			if strings.Contains(printed+string(js), fuzzSecret) && !bytes.Contains(data, []byte(fuzzSecret)) {
				t.Fatalf("DSN prints the planted password: %s", printed)
			}
		}
	})
}

func checkParseError(t *testing.T, data []byte, err error) {
	t.Helper()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error does not match ErrInvalid: %v", err)
	}
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 {
		t.Fatalf("error is not a non-empty Errors: %v", err)
	}
	for _, e := range es {
		if e.File != "fuzz.yaml" || e.Line < 0 || e.Column < 0 || e.Line == 0 && e.Column != 0 || e.Msg == "" {
			t.Fatalf("bad error %+v", e)
		}
	}
	if strings.Contains(err.Error(), fuzzSecret) && !bytes.Contains(data, []byte(fuzzSecret)) {
		t.Fatalf("error leaks the planted password:\n%v", err)
	}
}

// checkPlan checks the invariants of a plan that parsed without error.
func checkPlan(t *testing.T, p *Plan) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("invalid plan %+v: "+format, append([]any{p}, args...)...)
	}
	if !validName(p.Name) {
		fail("name %q", p.Name)
	}
	if e := p.Source.Engine(); e != Postgres && e != MySQL {
		fail("source engine %q", e)
	}
	if e := p.Target.Engine(); e != Postgres && e != MySQL {
		fail("target engine %q", e)
	}
	switch p.Lock.Engine() {
	case "", Redis, Etcd, ZooKeeper, Postgres, MySQL:
	default:
		fail("lock engine %q", p.Lock.Engine())
	}
	if p.LeaseTTL < MinLeaseTTL || p.BatchSize < 1 || p.BatchSize > MaxBatchSize || p.MaxRetries < 0 || !validIdent(p.FenceColumn) {
		fail("settings")
	}
	if len(p.Tables) == 0 && !p.Discover { // a discovering plan finds its tables in the source (Resolve)
		fail("no tables")
	}
	names := map[string]bool{}
	for _, sk := range p.Notify {
		if !validSinkName(sk.Name) || names[sk.Name] || (sk.Webhook == nil) == (sk.Command == nil) || sk.Line < 1 {
			fail("sink %q", sk.Name)
		}
		names[sk.Name] = true
		if sk.Timeout < MinSinkTimeout || sk.Timeout > MaxSinkTimeout || sk.GiveUpAfter < MinSinkGiveUpAfter {
			fail("sink %q durations", sk.Name)
		}
		if sk.Command != nil && (len(sk.Command.Argv) == 0 || sk.Command.Argv[0] == "") {
			fail("sink %q command", sk.Name)
		}
	}
	type pair struct{ s, t string }
	seen := map[pair]bool{}
	for _, tb := range p.Tables {
		if seen[pair{tb.Name, tb.Target}] {
			fail("duplicate table %q", tb.Name)
		}
		seen[pair{tb.Name, tb.Target}] = true
		for _, id := range [][]string{tb.SourceIdent(), tb.TargetIdent()} {
			if len(id) < 1 || len(id) > 2 {
				fail("ident %q", id)
			}
			for _, part := range id {
				if !validIdent(part) {
					fail("ident part %q", part)
				}
			}
		}
		if tb.Shards < ShardsAuto || tb.Shards > MaxShards || tb.Key != nil && len(tb.Key) == 0 { // nil: the primary key, found by Resolve
			fail("table %q shards/key", tb.Name)
		}
		if p.File != "" && tb.Line < 1 {
			fail("table %q line %d", tb.Name, tb.Line)
		}
		keys := map[string]bool{}
		for _, k := range tb.Key {
			if !validIdent(k) || keys[k] || k == p.FenceColumn {
				fail("key %q", k)
			}
			keys[k] = true
		}
		if tb.Columns != nil {
			cols := map[string]bool{}
			for _, c := range tb.Columns {
				if !validIdent(c) || cols[c] || c == p.FenceColumn {
					fail("column %q", c)
				}
				cols[c] = true
			}
			for k := range keys {
				if !cols[k] {
					fail("key %q not in columns", k)
				}
			}
		}
	}
}

func FuzzParseDSN(f *testing.F) {
	seeds := [][2]string{
		{"postgres://app:", "@pg:5432/shop?sslmode=disable"},
		{"postgresql://app@pg/shop?password=", "&x=1"},
		{"mysql://root:", "@127.0.0.1:3306/shop?parseTime=true"},
		{"root:", "@tcp(127.0.0.1:3306)/shop?parseTime=true"},
		{"root:", "@unix(/tmp/mysql.sock)/shop"},
		{"redis://:", "@localhost:6379/0"},
		{"rediss://u:", "@cache:6380"},
		{"postgres://u:a/", "@h/db"},
		{"postgres://u:1?", "@h/db"},
		{"postgres://u:1#", "@h/db"},
		{"postgres://db/shop?a=1;pass=", ""},
		{"", "://h/db"},
		{"http://u:", "@h"},
		{"postgres://u:", "%zz@h/db"},
		{"postgres://u:", "@[::1]:5432/db"},
		{"postgres://u:", "@h:99999/db"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, prefix, suffix string) {
		in := prefix + fuzzSecret + suffix
		d, err := ParseDSN(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not match ErrInvalid: %v", err)
			}
			if strings.Contains(err.Error(), fuzzSecret) {
				t.Fatalf("error leaks the password: %v", err)
			}
			if !d.IsZero() {
				t.Fatal("DSN returned with an error")
			}
			return
		}
		if d.IsZero() || d.Secret() != strings.TrimSpace(in) {
			t.Fatalf("Secret() = %q for %q", d.Secret(), in)
		}
		if e := d.Engine(); e != Postgres && e != MySQL && e != Redis && e != Etcd && e != ZooKeeper {
			t.Fatalf("engine %q", e)
		}
		clean := !strings.Contains(prefix+suffix, fuzzSecret[:4])
		if d.Password() == fuzzSecret && clean {
			printed := fmt.Sprintf("%v|%+v|%#v|%s|%q|%x|%d", d, d, d, d, d, d, d)
			js, _ := json.Marshal(d)
			if strings.Contains(d.Redacted()+printed+string(js), fuzzSecret) {
				t.Fatalf("password printed: %s", d.Redacted())
			}
		}
		// The redacted form is a valid DSN naming the same place.
		r, err := ParseDSN(d.Redacted())
		if err != nil {
			t.Fatalf("redacted form %q does not parse: %v", d.Redacted(), err)
		}
		if r.Engine() != d.Engine() || r.Host() != d.Host() || r.Port() != d.Port() || r.Database() != d.Database() || r.User() != d.User() {
			t.Fatalf("redacted form %q parses differently from %q", d.Redacted(), in)
		}
		if r.Redacted() != d.Redacted() {
			t.Fatalf("redacting twice: %q then %q", d.Redacted(), r.Redacted())
		}
	})
}
