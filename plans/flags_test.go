package plans

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// flagsBase are valid connection flags for the plan-less form.
var flagsBase = Overrides{
	Source: "postgres://app:Pa55word@pg:5432/shop",
	Target: "root:Pa55word@tcp(maria:3306)/shop",
	Redis:  "redis://:Pa55word@cache:6379/0",
}

func withFlags(f func(o *Overrides)) Overrides {
	o := flagsBase
	f(&o)
	return o
}

func TestFromFlags(t *testing.T) {
	t.Run("minimal", func(t *testing.T) {
		p, err := FromFlags(withFlags(func(o *Overrides) { o.Table, o.Key = "public.Orders", "id" }))
		if err != nil {
			t.Fatal(err)
		}
		// PostgreSQL to MySQL: the target defaults to the name without the schema.
		want := Table{Name: "public.Orders", Target: "Orders", Key: []string{"id"}}
		if p.Name != "public-orders" || p.File != "" || !reflect.DeepEqual(p.Tables, []Table{want}) {
			t.Errorf("got %+v", p)
		}
		if p.LeaseTTL != DefaultLeaseTTL || p.BatchSize != DefaultBatchSize || p.FenceColumn != DefaultFenceColumn || p.MaxRetries != DefaultMaxRetries {
			t.Errorf("defaults not applied: %+v", p)
		}
		if p.Target.Engine() != MySQL || p.Target.Host() != "maria" {
			t.Errorf("target %v", p.Target)
		}
	})
	t.Run("everything", func(t *testing.T) {
		p, err := FromFlags(withFlags(func(o *Overrides) {
			o.Name, o.Table, o.TargetTable = "move-1", "orders", "archive.orders"
			o.Key, o.Columns, o.Shards = "tenant, id", "tenant,id, total", 8
			o.BatchSize, o.LeaseTTL = 250, 2*time.Second
		}))
		if err != nil {
			t.Fatal(err)
		}
		want := Table{Name: "orders", Target: "archive.orders", Key: []string{"tenant", "id"}, Columns: []string{"tenant", "id", "total"}, Shards: 8}
		if p.Name != "move-1" || p.BatchSize != 250 || p.LeaseTTL != 2*time.Second || !reflect.DeepEqual(p.Tables, []Table{want}) {
			t.Errorf("got %+v", p)
		}
	})

	invalid := []struct {
		name string
		o    Overrides
		want []string
	}{
		{"nothing", Overrides{}, []string{
			"flags: name is required", "flags: source is required", "flags: target is required",
			"flags: table is required (or --include to copy every table that matches)",
		}},
		{"bad values", withFlags(func(o *Overrides) {
			o.Name, o.Table, o.Key, o.Columns, o.Shards, o.BatchSize, o.LeaseTTL = "Bad!", "t", "id,,id", "x", -1, 200000, time.Millisecond
		}), []string{
			`flags: name "Bad!" must match [a-z0-9_-]+`,
			"flags: lease_ttl 1ms is too short (at least 300ms)",
			"flags: batch_size 200000 is out of range 1..100000",
			`flags: table "t": shards -1 is out of range 1..1024 (or auto)`,
			`flags: table "t": key has an empty column name`,
			`flags: table "t": key lists column "id" twice`,
			`flags: table "t": columns must include key column "id"`,
		}},
		{"bad DSNs", withFlags(func(o *Overrides) {
			o.Table, o.Key = "t", "id"
			o.Source, o.Target, o.Redis = "postgres://u:Pa55word@h:0/db", flagsBase.Redis, "Pa55word"
		}), []string{
			"flags: source: invalid DSN: postgres DSN port must be a number 1..65535",
			"flags: redis: invalid DSN: want a postgres://, postgresql://, mysql://, redis:// or rediss:// URL, or user:pass@tcp(host:port)/db",
			"flags: target must be a postgres:// or mysql:// DSN, not redis",
		}},
		{"name cannot be derived", withFlags(func(o *Overrides) { o.Table, o.Key = "日本", "id" }), []string{
			"flags: name is required",
		}},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			p, err := FromFlags(tt.o)
			if err == nil {
				t.Fatalf("no error; plan %+v", p)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(tt.want, "\n"))
			}
			if !errors.Is(err, ErrInvalid) {
				t.Error("not ErrInvalid")
			}
			if strings.Contains(err.Error(), "Pa55") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}

const twoTables = header + `tables:
  - name: public.orders
    target: orders
    key: [id]
    columns: [id, total]
  - name: customers
    key: [id]
`

func TestPlan_Apply(t *testing.T) {
	load := func(t *testing.T) *Plan {
		t.Helper()
		p, err := Parse("plan.yaml", []byte(twoTables), testLookup)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("plan fields", func(t *testing.T) {
		p := load(t)
		err := p.Apply(Overrides{Name: "other", Source: "mysql://u@h/db", BatchSize: 10, LeaseTTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != "other" || p.Source.Engine() != MySQL || p.BatchSize != 10 || p.LeaseTTL != time.Second || len(p.Tables) != 2 {
			t.Errorf("got %+v", p)
		}
		if p.Target.Engine() != MySQL || p.Lock.IsZero() || p.File != "plan.yaml" {
			t.Errorf("file values lost: %+v", p)
		}
	})
	t.Run("narrow to a table by target name and override it", func(t *testing.T) {
		p := load(t)
		if err := p.Apply(Overrides{Table: "orders", Key: "id", Columns: "id,total,note", Shards: 3, TargetTable: "orders2"}); err != nil {
			t.Fatal(err)
		}
		want := []Table{{Name: "public.orders", Target: "orders2", Key: []string{"id"}, Columns: []string{"id", "total", "note"}, Shards: 3, Line: 6, Column: 5}}
		if !reflect.DeepEqual(p.Tables, want) {
			t.Errorf("tables %+v", p.Tables)
		}
	})
	t.Run("narrow by source name", func(t *testing.T) {
		p := load(t)
		if err := p.Apply(Overrides{Table: "customers"}); err != nil {
			t.Fatal(err)
		}
		if len(p.Tables) != 1 || p.Tables[0].Name != "customers" || p.Tables[0].Line != 10 {
			t.Errorf("tables %+v", p.Tables)
		}
	})
	invalid := []struct {
		name string
		o    Overrides
		want []string
	}{
		{"unknown table", Overrides{Table: "nope"}, []string{`flags: table "nope" is not in the plan (it has "public.orders", "customers")`}},
		{"table flags need a table", Overrides{Key: "id"}, []string{"flags: table is required to choose which of the plan's 2 tables key, columns, shards or target table apply to"}},
		{"key outside columns", Overrides{Table: "public.orders", Key: "other"}, []string{`flags: table "public.orders": columns must include key column "other"`}},
		{"bad values", Overrides{Name: "A", BatchSize: -5, Redis: "postgres://h/db"}, []string{
			`flags: name "A" must match [a-z0-9_-]+`,
			"flags: redis must be a redis:// DSN, not postgres",
			"flags: batch_size -5 is out of range 1..100000",
		}},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			p := load(t)
			before := p.clone()
			err := p.Apply(tt.o)
			if err == nil {
				t.Fatalf("no error; plan %+v", p)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(tt.want, "\n"))
			}
			if !errors.Is(err, ErrInvalid) {
				t.Error("not ErrInvalid")
			}
			if !reflect.DeepEqual(p, before) {
				t.Errorf("plan changed on error:\n%+v\nwas\n%+v", p, before)
			}
		})
	}
	t.Run("ambiguous", func(t *testing.T) {
		p, err := Parse("plan.yaml", []byte(header+"tables:\n  - {name: t, target: a, key: [id]}\n  - {name: t, target: b, key: [id]}\n"), testLookup)
		if err != nil {
			t.Fatal(err)
		}
		err = p.Apply(Overrides{Table: "t"})
		if err == nil || err.Error() != `flags: table "t" matches 2 tables of the plan; name it by its target table` {
			t.Errorf("error %v", err)
		}
		if err := p.Apply(Overrides{Table: "b"}); err != nil || len(p.Tables) != 1 || p.Tables[0].Target != "b" {
			t.Errorf("by target: %v %+v", err, p.Tables)
		}
	})
}

func TestParseWith(t *testing.T) {
	t.Run("flags stand in for unset variables and broken fields", func(t *testing.T) {
		doc := "name: x\nsource: ${UNSET_SOURCE}\ntarget: ${TARGET_URL}\nredis: ${REDIS_URL}\nbatch_size: lots\ntables: [{name: t, key: ['${UNSET_KEY}']}]\n"
		p, err := ParseWith("plan.yaml", []byte(doc), testLookup, Overrides{Source: "postgres://h/db", BatchSize: 7, Key: "id"})
		if err != nil {
			t.Fatal(err)
		}
		if p.Source.Host() != "h" || p.BatchSize != 7 || !reflect.DeepEqual(p.Tables[0].Key, []string{"id"}) {
			t.Errorf("got %+v", p)
		}
	})
	t.Run("problems elsewhere are still reported", func(t *testing.T) {
		doc := "name: x\nsource: ${UNSET_SOURCE}\ntarget: ${UNSET_TARGET}\nredis: ${REDIS_URL}\ntables: [{name: t, key: [id]}]\n"
		_, err := ParseWith("plan.yaml", []byte(doc), testLookup, Overrides{Source: "postgres://h/db"})
		if err == nil || err.Error() != "plan.yaml:3:9: target: environment variable UNSET_TARGET is not set" {
			t.Errorf("error %v", err)
		}
	})
	t.Run("tables from flags", func(t *testing.T) {
		p, err := ParseWith("plan.yaml", []byte(header), testLookup, Overrides{Table: "t", Key: "id"})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Tables) != 1 || p.Tables[0].Target != "t" {
			t.Errorf("tables %+v", p.Tables)
		}
	})
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"public.orders":  "public-orders",
		"Order Lines!!":  "order-lines",
		"__x--y__":       "__x-y__",
		"..a..":          "a",
		"":               "",
		"schema.ÜBER_t1": "schema-ber_t1",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
