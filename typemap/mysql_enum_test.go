package typemap

import (
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/plans"
)

// MySQL's ENUM and SET map to text (their members kept in Values for the
// PostgreSQL renderer's CHECK), YEAR to smallint, unsigned integers to the
// next wider type; bit has no mapping and asks for a type in the plan.
func TestMySQLToPG_EnumSetYearBit(t *testing.T) {
	cols := []Column{
		{Name: "status", Type: "enum('Active','in''active')", Base: "enum", NotNull: true, Values: []string{"Active", "in'active"}},
		{Name: "flags", Type: "set('X','y')", Base: "set", Values: []string{"X", "y"}},
		{Name: "born", Type: "year(4)", Base: "year"},
		{Name: "n", Type: "int(10) unsigned", Base: "int"},
	}
	got, err := MapColumns(plans.MySQL, plans.Postgres, "t", cols, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"text", "text", "smallint", "bigint"} {
		if got[i].Type != want {
			t.Errorf("%s: %s, want %s", cols[i].Name, got[i].Type, want)
		}
	}
	if len(got[0].Values) != 2 || got[0].Values[1] != "in'active" {
		t.Errorf("ENUM members lost: %q", got[0].Values)
	}
	_, err = MapColumns(plans.MySQL, plans.Postgres, "t", []Column{{Name: "b", Type: "bit(1)", Base: "bit"}}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "t.b: bit(1) has no mapping") {
		t.Errorf("bit(1): %v, want no mapping", err)
	}
	if got, err := MapColumns(plans.MySQL, plans.Postgres, "t", []Column{{Name: "b", Type: "bit(1)", Base: "bit"}}, nil, map[string]string{"b": "bytea"}); err != nil || got[0].Type != "bytea" {
		t.Errorf("bit(1) named bytea: %v, %v", got, err)
	}
}
