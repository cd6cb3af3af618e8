package plans

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testPassword has characters special to YAML (": ", "'", "&", "*", "!",
// "@") that are still legal in a URL's userinfo.
const testPassword = "Pa55: w@rd'&*!"

// testEnv is the environment the plan tests expand ${VAR} from.
var testEnv = map[string]string{
	"SOURCE_URL": "postgres://app:" + "Pa55%3A%20w%40rd'&*!" + "@pg:5432/shop?sslmode=disable",
	"TARGET_URL": "mysql://root:" + "Pa55%3A%20w%40rd'&*!" + "@maria:3306/shop",
	"REDIS_URL":  "redis://:" + "Pa55%3A%20w%40rd'&*!" + "@cache:6379/0",
	"RAW_PW":     testPassword,
	"ENC_PW":     "Pa55:%20w@rd'&*!",
	"TABLE":      "public.orders",
	"BATCH":      "lots",
	"EMPTY":      "",
	"DOLLAR":     "${TABLE}",
}

func testLookup(name string) (string, bool) {
	v, ok := testEnv[name]
	return v, ok
}

// header is the valid top of a plan; tests append tables.
const header = `name: orders-move
source: ${SOURCE_URL}
target: ${TARGET_URL}
redis: ${REDIS_URL}
`

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func(p *Plan) // adjusts the expected plan built from defaults
	}{
		{
			name: "minimal with defaults",
			yaml: header + "tables:\n  - name: orders\n    key: [id]\n",
			want: func(p *Plan) {
				p.Tables = []Table{{Name: "orders", Target: "orders", Key: []string{"id"}, Line: 6, Column: 5}}
			},
		},
		{
			name: "everything set",
			yaml: header + `lease_ttl: 1m30s
batch_size: 500
fence_column: _token
max_retries: 0
max_takeovers: 5
takeover_window: 1h
max_outage: 30s
tables:
  - name: public.orders
    target: orders
    key: [id]
    columns: [id, ext_id, customer, amount, created_at]
    shards: 4
`,
			want: func(p *Plan) {
				p.LeaseTTL, p.BatchSize, p.FenceColumn, p.MaxRetries = 90*time.Second, 500, "_token", 0
				p.MaxTakeovers, p.TakeoverWindow, p.MaxOutage = 5, time.Hour, 30*time.Second
				p.Tables = []Table{{Name: "public.orders", Target: "orders", Key: []string{"id"},
					Columns: []string{"id", "ext_id", "customer", "amount", "created_at"}, Shards: 4, Line: 13, Column: 5}}
			},
		},
		{
			name: "composite key, schema-qualified names, several tables",
			yaml: header + `tables:
  - name: sales.order_lines
    target: archive.order_lines
    key: [order_id, line_no]
  - name: customers
    key:
      - tenant
      - id
    columns: [tenant, id, name]
`,
			want: func(p *Plan) {
				p.Tables = []Table{
					{Name: "sales.order_lines", Target: "archive.order_lines", Key: []string{"order_id", "line_no"}, Line: 6, Column: 5},
					{Name: "customers", Target: "customers", Key: []string{"tenant", "id"}, Columns: []string{"tenant", "id", "name"}, Line: 9, Column: 5},
				}
			},
		},
		{
			name: "env expansion in values, escapes, bare $ left alone, no re-expansion",
			yaml: header + `fence_column: "$${fence}$x"
tables:
  - name: ${TABLE}
    target: "${DOLLAR}_copy"
    key: ["${TABLE}.id", "$$id", $id]
`,
			want: func(p *Plan) {
				p.FenceColumn = "${fence}$x"
				p.Tables = []Table{{Name: "public.orders", Target: "${TABLE}_copy", Key: []string{"public.orders.id", "$$id", "$id"}, Line: 7, Column: 5}}
			},
		},
		{
			name: "password with YAML-special characters from env",
			yaml: `name: pw
source: postgres://app:${ENC_PW}@pg/shop
target: mysql://root@maria/shop?password=${ENC_PW}
redis: ${REDIS_URL}
tables: [{name: t, key: id}]
`,
			want: func(p *Plan) {
				p.Name = "pw"
				p.Tables = []Table{{Name: "t", Target: "t", Key: []string{"id"}, Line: 5, Column: 10}}
			},
		},
		{
			name: "null values take defaults",
			yaml: header + "lease_ttl:\nbatch_size: ~\ntables:\n  - name: t\n    target:\n    key: [k]\n    columns:\n",
			want: func(p *Plan) {
				p.Tables = []Table{{Name: "t", Target: "t", Key: []string{"k"}, Line: 8, Column: 5}}
			},
		},
		{
			name: "anchors and aliases",
			yaml: header + "tables:\n  - name: a\n    key: &k [tenant, id]\n  - name: b\n    key: *k\n",
			want: func(p *Plan) {
				p.Tables = []Table{
					{Name: "a", Target: "a", Key: []string{"tenant", "id"}, Line: 6, Column: 5},
					{Name: "b", Target: "b", Key: []string{"tenant", "id"}, Line: 8, Column: 5},
				}
			},
		},
		{
			name: "same source to two targets",
			yaml: header + "tables:\n  - {name: t, target: t1, key: [id]}\n  - {name: t, target: t2, key: [id]}\n",
			want: func(p *Plan) {
				p.Tables = []Table{
					{Name: "t", Target: "t1", Key: []string{"id"}, Line: 6, Column: 5},
					{Name: "t", Target: "t2", Key: []string{"id"}, Line: 7, Column: 5},
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("plan.yaml", []byte(tt.yaml), testLookup)
			if err != nil {
				t.Fatalf("Parse:\n%v", err)
			}
			want := &Plan{
				Name: "orders-move", File: "plan.yaml",
				Source: got.Source, Target: got.Target, Lock: got.Lock,
				LeaseTTL: 30 * time.Second, BatchSize: 1000, FenceColumn: "_fence", MaxRetries: 5,
				MaxTakeovers: 3, TakeoverWindow: 10 * time.Minute, MaxOutage: 5 * time.Minute,
			}
			tt.want(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			if got.Source.Engine() != Postgres || got.Target.Engine() != MySQL || got.Lock.Engine() != Redis {
				t.Errorf("engines %s %s %s", got.Source.Engine(), got.Target.Engine(), got.Lock.Engine())
			}
			if got.Source.Password() != testPassword {
				t.Errorf("source password %q, want %q", got.Source.Password(), testPassword)
			}
		})
	}
}

func TestParse_expandedDSN(t *testing.T) {
	p, err := Parse("plan.yaml", []byte(header+"tables: [{name: t, key: [id]}]\n"), testLookup)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source.Secret() != testEnv["SOURCE_URL"] {
		t.Errorf("Secret() = %q", p.Source.Secret())
	}
	if got, want := p.Source.String(), "postgres://app:xxxxx@pg:5432/shop?sslmode=disable"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestParse_invalid(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // every error line, in order
	}{
		{
			name: "unknown keys",
			yaml: header + "batchsize: 10\ntables:\n  - name: t\n    key: [id]\n    shard: 2\n    colums: [id]\n    zzz: 1\n",
			want: []string{
				`plan.yaml:5:1: unknown key "batchsize" in plan (did you mean "batch_size"?)`,
				`plan.yaml:9:5: unknown key "shard" in table (did you mean "shards"?)`,
				`plan.yaml:10:5: unknown key "colums" in table (did you mean "columns"?)`,
				`plan.yaml:11:5: unknown key "zzz" in table`,
			},
		},
		{
			name: "missing required fields",
			yaml: "lease_ttl: 10s\n",
			want: []string{
				"plan.yaml:1:1: name is required",
				"plan.yaml:1:1: source is required",
				"plan.yaml:1:1: target is required",
			},
		},
		{
			name: "missing table fields",
			yaml: header + "tables:\n  - target: x\n  - name: y\n    key: []\n",
			want: []string{
				"plan.yaml:6:5: table #1: name is required",
				`plan.yaml:8:10: table "y": key must name at least one column (leave it out for the primary key)`,
			},
		},
		{
			name: "bad name",
			yaml: strings.Replace(header, "orders-move", "Orders Move", 1) + "tables: [{name: t, key: [id]}]\n",
			want: []string{`plan.yaml:1:7: name "Orders Move" must match [a-z0-9_-]+`},
		},
		{
			name: "bad values",
			yaml: header + "lease_ttl: 5\nbatch_size: ${BATCH}\nmax_retries: -1\nfence_column: ''\ntables:\n  - name: t\n    key: [id]\n    shards: 2000\n",
			want: []string{
				`plan.yaml:5:12: lease_ttl "5" is not a duration (want a number with a unit, like 30s or 1m30s)`,
				`plan.yaml:6:13: batch_size "${BATCH}" (after expansion) is not a whole number`,
				"plan.yaml:7:14: max_retries -1 must not be negative",
				"plan.yaml:8:15: fence_column must be a non-empty column name without NUL bytes",
				`plan.yaml:12:13: table "t": shards 2000 is out of range 1..1024 (or auto)`,
			},
		},
		{
			name: "bad takeover limit",
			yaml: header + "max_takeovers: 0\ntakeover_window: -1m\nmax_outage: -1s\ntables: [{name: t, key: [id]}]\n",
			want: []string{
				"plan.yaml:5:16: max_takeovers 0 must be at least 1",
				"plan.yaml:6:18: takeover_window -1m0s must be positive",
				"plan.yaml:7:13: max_outage -1s must not be negative (0: an unreachable database counts against max_retries)",
			},
		},
		{
			name: "out of range",
			yaml: header + "lease_ttl: 100ms\nbatch_size: 0\ntables:\n  - name: t\n    key: [id]\n    shards: 0\n",
			want: []string{
				"plan.yaml:5:12: lease_ttl 100ms is too short (at least 300ms)",
				"plan.yaml:6:13: batch_size 0 is out of range 1..100000",
				`plan.yaml:10:13: table "t": shards 0 is out of range 1..1024 (or auto)`,
			},
		},
		{
			name: "bad DSNs",
			yaml: "name: x\nsource: postgress://u:Pa55word@h/db\ntarget: ${REDIS_URL}\nredis: ${SOURCE_URL}\ntables: [{name: t, key: [id]}]\n",
			want: []string{
				`plan.yaml:2:9: source: invalid DSN: unsupported scheme "postgress" (want postgres://, postgresql://, mysql://, redis://, rediss://, redis+sentinel://, redis+cluster://, etcd://, etcds:// or zk://)`,
				"plan.yaml:3:9: target must be a postgres:// or mysql:// DSN, not redis",
				"plan.yaml:4:8: redis must be a redis:// DSN, not postgres",
			},
		},
		{
			name: "env problems",
			yaml: "name: x\nsource: ${NOPE}\ntarget: ${EMPTY}\nredis: ${REDIS_URL\ntables:\n  - name: ${1BAD}\n    key: [\"${ALSO_NOPE}\", id]\n",
			want: []string{
				"plan.yaml:2:9: source: environment variable NOPE is not set",
				`plan.yaml:3:9: target is empty after expanding "${EMPTY}"`,
				"plan.yaml:4:8: redis: unterminated ${ (write $${ for a literal ${)",
				`plan.yaml:6:11: name: "1BAD" is not a variable name (want ${NAME}; write $${ for a literal ${)`,
				"plan.yaml:7:11: key: environment variable ALSO_NOPE is not set",
			},
		},
		{
			name: "key and columns",
			yaml: header + `tables:
  - name: t
    key: [id, "", id, _fence]
    columns: [id, name, name]
  - name: u
    key: [tenant, id]
    columns: [id]
  - name: v
    key: {id: 1}
    columns: [[a]]
`,
			want: []string{
				`plan.yaml:7:15: table "t": key has an empty column name`,
				`plan.yaml:7:19: table "t": key lists column "id" twice`,
				`plan.yaml:7:23: table "t": key lists the fence column "_fence", which the migration writes itself`,
				`plan.yaml:8:14: table "t": columns must include key column "_fence"`,
				`plan.yaml:8:25: table "t": columns lists column "name" twice`,
				`plan.yaml:11:14: table "u": columns must include key column "tenant"`,
				"plan.yaml:13:10: key must be a list of column names",
				"plan.yaml:14:15: columns must be a list of column names",
			},
		},
		{
			name: "table names",
			yaml: header + "tables:\n  - {name: a.b.c, key: [id]}\n  - {name: .x, target: 'y.', key: [id]}\n",
			want: []string{
				`plan.yaml:6:12: table "a.b.c": name "a.b.c" must be table or schema.table`,
				`plan.yaml:7:12: table ".x": name ".x" must be table or schema.table`,
				`plan.yaml:7:24: table ".x": target "y." must be table or schema.table`,
			},
		},
		{
			name: "reserved target names",
			yaml: header + "tables:\n  - {name: a, target: public._MIGRATE_fence, key: [id]}\n  - {name: public._migrate_checkpoint, key: [id]}\n",
			want: []string{
				`plan.yaml:6:23: table "a": target "public._MIGRATE_fence" is a name migrate keeps for its own tables in the target (_migrate_*); give the table another target name`,
				`plan.yaml:7:5: table "public._migrate_checkpoint": target "_migrate_checkpoint" is a name migrate keeps for its own tables in the target (_migrate_*); give the table another target name`,
			},
		},
		{
			name: "duplicate table",
			yaml: header + "tables:\n  - name: public.orders\n    target: orders\n    key: [id]\n  - name: ${TABLE}\n    target: orders\n    key: [id]\n",
			want: []string{`plan.yaml:9:5: target table "orders" is written by two tables of the plan (first at line 6, column 5); each target table needs its own plan`},
		},
		{
			name: "two sources into one target",
			yaml: header + "tables:\n  - name: public.a\n    target: t\n    key: [id]\n  - name: public.b\n    target: t\n    key: [id]\n",
			want: []string{`plan.yaml:9:5: target table "t" is written by two tables of the plan (first at line 6, column 5); each target table needs its own plan`},
		},
		{
			name: "duplicate key",
			yaml: header + "name: again\ntables: [{name: t, key: [id], key: [x]}]\n",
			want: []string{
				`plan.yaml:5:1: duplicate key "name" in plan (first at line 1, column 1)`,
				`plan.yaml:6:31: duplicate key "key" in table (first at line 6, column 20)`,
			},
		},
		{
			name: "wrong shapes",
			yaml: "name: [a]\nsource: {x: 1}\ntarget: ${TARGET_URL}\nredis: ${REDIS_URL}\ntables: orders\n",
			want: []string{
				"plan.yaml:1:7: name must be a single value, not a list",
				"plan.yaml:2:9: source must be a single value, not a mapping",
				"plan.yaml:5:9: tables must be a list of tables",
			},
		},
		{
			name: "table not a mapping",
			yaml: header + "tables:\n  - orders\n  - {name: t, key: [id]}\n",
			want: []string{"plan.yaml:6:5: each table must be a mapping with at least a name"},
		},
		{
			name: "merge key",
			yaml: header + "base: &b {key: [id]}\ntables:\n  - <<: *b\n    name: t\n",
			want: []string{
				`plan.yaml:5:1: unknown key "base" in plan`,
				"plan.yaml:7:5: merge keys (<<) are not supported in table",
			},
		},
		{
			name: "yaml syntax error",
			yaml: header + "tables: [{name: t, key: [id]\n",
			want: []string{"plan.yaml:5: invalid YAML: did not find expected ',' or '}'"},
		},
		{
			name: "yaml scanner error",
			yaml: "name: x\n\tsource: y\n",
			want: []string{"plan.yaml:2:1: invalid YAML: found a tab character that violates indentation"},
		},
		{
			name: "tab indentation after a quoted value",
			yaml: "name: x\nsource: 'y'\n  \ttarget: z\n",
			want: []string{"plan.yaml:3:3: invalid YAML: found character that cannot start any token (the line is indented with a tab; YAML indents with spaces only)"},
		},
		{
			name: "character that cannot start a token",
			yaml: header + "batch_size: @10\n",
			want: []string{"plan.yaml:5: invalid YAML: found character that cannot start any token"},
		},
		{
			name: "unknown anchor",
			yaml: header + "tables:\n  - name: t\n    key: *nokey\n",
			want: []string{"plan.yaml:7:10: invalid YAML: unknown anchor 'nokey' referenced"},
		},
		{
			name: "empty file",
			yaml: "",
			want: []string{"plan.yaml: the plan file is empty"},
		},
		{
			name: "comments only",
			yaml: "# nothing yet\n",
			want: []string{"plan.yaml: the plan file is empty"},
		},
		{
			name: "not a mapping",
			yaml: "- name: x\n",
			want: []string{"plan.yaml:1:1: a plan must be a mapping of keys (name, source, target, lock, tables, ...)"},
		},
		{
			name: "two documents",
			yaml: header + "tables: [{name: t, key: [id]}]\n---\nname: y\n",
			want: []string{"plan.yaml:6:1: a plan file holds one YAML document; found another"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("plan.yaml", []byte(tt.yaml), testLookup)
			if err == nil {
				t.Fatalf("no error; plan %+v", p)
			}
			if p != nil {
				t.Errorf("plan %+v returned with an error", p)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(tt.want, "\n"))
			}
			if !errors.Is(err, ErrInvalid) {
				t.Error("errors.Is(err, ErrInvalid) = false")
			}
			var one *Error
			if !errors.As(err, &one) || one.File != "plan.yaml" {
				t.Errorf("errors.As(*Error) = %+v", one)
			}
			assertNoSecret(t, err.Error())
		})
	}
}

// assertNoSecret fails when s holds the test password in any form.
func assertNoSecret(t *testing.T, s string) {
	t.Helper()
	for _, secret := range []string{testPassword, "Pa55"} {
		if strings.Contains(s, secret) {
			t.Errorf("%q leaks the password", s)
		}
	}
}

func TestParse_nilLookupUsesEnviron(t *testing.T) {
	t.Setenv("PLANS_TEST_TABLE", "from_env")
	p, err := Parse("p.yaml", []byte("name: x\nsource: postgres://h/db\ntarget: mysql://h/db\nredis: redis://h\ntables: [{name: '${PLANS_TEST_TABLE}', key: [id]}]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tables[0].Name != "from_env" {
		t.Errorf("table %q", p.Tables[0].Name)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(path, []byte(header+"tables: [{name: t, key: [id]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("ok", func(t *testing.T) {
		p, err := Load(path, testLookup)
		if err != nil {
			t.Fatal(err)
		}
		if p.File != path || p.Name != "orders-move" {
			t.Errorf("File %q Name %q", p.File, p.Name)
		}
	})
	t.Run("errors name the path", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(bad, []byte("name: x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(bad, testLookup)
		if err == nil || !strings.HasPrefix(err.Error(), bad+":1:1: ") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "nope.yaml"), testLookup)
		if !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrInvalid) {
			t.Errorf("error %v", err)
		}
	})
}

func TestTable_Ident(t *testing.T) {
	tests := []struct {
		name, target   string
		source, tident []string
	}{
		{"public.orders", "orders", []string{"public", "orders"}, []string{"orders"}},
		{"orders", "archive.orders", []string{"orders"}, []string{"archive", "orders"}},
		{"Odd Name", "odd-name", []string{"Odd Name"}, []string{"odd-name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := Table{Name: tt.name, Target: tt.target}
			if got := tb.SourceIdent(); !reflect.DeepEqual(got, tt.source) {
				t.Errorf("SourceIdent() = %q, want %q", got, tt.source)
			}
			if got := tb.TargetIdent(); !reflect.DeepEqual(got, tt.tident) {
				t.Errorf("TargetIdent() = %q, want %q", got, tt.tident)
			}
		})
	}
}

func TestPlan_Table(t *testing.T) {
	p := &Plan{Tables: []Table{
		{Name: "public.orders", Target: "orders"},
		{Name: "orders", Target: "orders_archive"},
		{Name: "customers", Target: "clients"},
	}}
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"public.orders", "public.orders", true},
		{"orders", "orders", true}, // a source name wins over a target name
		{"clients", "customers", true},
		{"orders_archive", "orders", true},
		{"nope", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := p.Table(tt.name)
			if ok != tt.ok || got.Name != tt.want {
				t.Errorf("Table(%q) = %q, %v; want %q, %v", tt.name, got.Name, ok, tt.want, tt.ok)
			}
		})
	}
}
