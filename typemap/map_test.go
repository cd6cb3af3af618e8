package typemap

import (
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/plans"
)

func TestMapColumns(t *testing.T) {
	pg, my := plans.Postgres, plans.MySQL
	t.Run("postgres to mysql", func(t *testing.T) {
		cols := []Column{
			{Name: "id", Type: "text", Base: "text", NotNull: true},
			{Name: "n", Type: "numeric(12,3)", Base: "numeric"},
			{Name: "ok", Type: "boolean", Base: "boolean"},
			{Name: "at", Type: "timestamp(3) with time zone", Base: "timestamp with time zone"},
			{Name: "u", Type: "uuid", Base: "uuid"},
			{Name: "j", Type: "jsonb", Base: "jsonb"},
			{Name: "body", Type: "text", Base: "text"},
			{Name: "e", Type: "mood", Base: "enum"},
		}
		got, err := MapColumns(pg, my, "public.t", cols, []string{"id"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"varchar(768)", "decimal(12,3)", "tinyint(1)", "datetime(3)", "char(36)", "json", "longtext", "varchar(255)"}
		for i, c := range got {
			if c.Type != want[i] {
				t.Errorf("%s: %s, want %s", c.Name, c.Type, want[i])
			}
		}
	})
	t.Run("mysql to postgres", func(t *testing.T) {
		cols := []Column{
			{Name: "a", Type: "tinyint(1)", Base: "tinyint"},
			{Name: "b", Type: "int(10) unsigned", Base: "int"},
			{Name: "c", Type: "bigint(20) unsigned", Base: "bigint"},
			{Name: "d", Type: "datetime(6)", Base: "datetime"},
			{Name: "e", Type: "timestamp", Base: "timestamp"},
			{Name: "f", Type: "enum('x','y')", Base: "enum"},
			{Name: "g", Type: "longtext", Base: "json"},
			{Name: "h", Type: "mediumblob", Base: "mediumblob"},
		}
		got, err := MapColumns(my, pg, "t", cols, []string{"a"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"boolean", "bigint", "numeric(20,0)", "timestamp(6)", "timestamptz(0)", "text", "jsonb", "bytea"}
		for i, c := range got {
			if c.Type != want[i] {
				t.Errorf("%s: %s, want %s", c.Name, c.Type, want[i])
			}
		}
	})
	t.Run("text key parts share what the other key columns leave of 3072 bytes", func(t *testing.T) {
		cols := []Column{{Name: "a", Type: "bigint", Base: "bigint"}, {Name: "b", Type: "text", Base: "text"}, {Name: "c", Type: "bytea", Base: "bytea"}}
		got, err := MapColumns(pg, my, "t", cols, []string{"a", "b", "c"}, nil)
		if err != nil || got[1].Type != "varchar(383)" || got[2].Type != "varbinary(1532)" {
			t.Fatalf("got %v %v, want varchar(383) and varbinary(1532)", got, err)
		}
	})
	t.Run("mysql to mysql drops integer display widths", func(t *testing.T) {
		cols := []Column{{Name: "a", Type: "bigint(20) unsigned", Base: "bigint"}, {Name: "b", Type: "tinyint(1)", Base: "tinyint"}, {Name: "c", Type: "longtext", Base: "json"}}
		got, err := MapColumns(my, my, "t", cols, []string{"a"}, nil)
		if err != nil || got[0].Type != "bigint unsigned" || got[1].Type != "tinyint(1)" || got[2].Type != "json" {
			t.Fatalf("got %v %v", got, err)
		}
	})
	t.Run("no mapping names table.column, override wins", func(t *testing.T) {
		cols := []Column{{Name: "n", Type: "numeric", Base: "numeric"}, {Name: "iv", Type: "interval", Base: "interval"}}
		_, err := MapColumns(pg, my, "public.t", cols, nil, nil)
		if err == nil || !contains(err.Error(), "public.t.n: numeric has no precision", "public.t.iv: interval has no mapping", "types:") {
			t.Fatalf("err = %v", err)
		}
		got, err := MapColumns(pg, my, "public.t", cols, nil, map[string]string{"n": "decimal(30,10)", "iv": "varchar(64)"})
		if err != nil || got[0].Type != "decimal(30,10)" || got[1].Type != "varchar(64)" {
			t.Fatalf("override: %v %v", got, err)
		}
	})
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// A MySQL SET mapped to PostgreSQL text keeps no members: they would make
// a CHECK that refuses every value of more than one member ("a,b").
func TestMapColumns_SetKeepsNoMembers(t *testing.T) {
	cols := []Column{{Name: "k", Type: "int", Base: "int", NotNull: true},
		{Name: "flags", Type: "set('a','b')", Base: "set", Values: []string{"a", "b"}},
		{Name: "kind", Type: "enum('x','y')", Base: "enum", Values: []string{"x", "y"}}}
	out, err := MapColumns(plans.MySQL, plans.Postgres, "t", cols, []string{"k"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out[1].Values != nil || len(out[2].Values) != 2 {
		t.Errorf("mapped values: set %v, enum %v; want none, both", out[1].Values, out[2].Values)
	}
}
