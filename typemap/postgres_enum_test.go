package typemap

import (
	"testing"

	"github.com/migrate-dev/migrate/plans"
)

func TestMapColumns_PostgresEnumsAndMore(t *testing.T) {
	for _, c := range []struct {
		col  Column
		key  bool
		want string // "" for an error
	}{
		{Column{Name: "m", Type: "mood", Base: "enum", Values: []string{"sad", "ok", `it's \\ fine`}}, false, `enum('sad','ok','it''s \\\\ fine')`},
		{Column{Name: "m", Type: "mood", Base: "enum", Values: []string{"sad", "ok"}}, true, "enum('sad','ok')"},
		{Column{Name: "m", Type: "mood", Base: "enum"}, false, "varchar(255)"},                                 // labels unknown
		{Column{Name: "m", Type: "mood", Base: "enum", Values: []string{"ok ", "sad"}}, false, "varchar(255)"}, // MySQL strips trailing spaces
		{Column{Name: "m", Type: "mood", Base: "enum", Values: []string{"ok", "OK"}}, false, "varchar(255)"},   // duplicates but for case
		{Column{Name: "m", Type: "mood", Base: "enum", Values: []string{"", "sad"}}, false, "varchar(255)"},    // MySQL's error value
		{Column{Name: "y", Type: "year", Base: "integer"}, false, "int"},                                       // a domain: its base
		{Column{Name: "s", Type: "short_text", Base: "character varying"}, false, "longtext"},                  // a domain over varchar(n): its length is the domain's
		{Column{Name: "a", Type: "text[]", Base: "text[]"}, false, "longtext"},
		{Column{Name: "a", Type: "integer[]", Base: "integer[]"}, true, ""},
		{Column{Name: "v", Type: "tsvector", Base: "tsvector"}, false, "longtext"},
		{Column{Name: "r", Type: "int4range", Base: "int4range"}, false, "longtext"},
		{Column{Name: "r", Type: "floatrange", Base: "floatrange"}, false, ""}, // a user range type: no mapping
		{Column{Name: "p", Type: "point", Base: "point"}, false, ""},
	} {
		var key []string
		if c.key {
			key = []string{c.col.Name}
		}
		got, err := MapColumns(plans.Postgres, plans.MySQL, "t", []Column{c.col}, key, nil)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%s %s: %s, want an error", c.col.Name, c.col.Type, got[0].Type)
		case c.want != "" && (err != nil || got[0].Type != c.want):
			t.Errorf("%s %s %v: %v %v, want %s", c.col.Name, c.col.Type, c.col.Values, got, err, c.want)
		}
	}
}
