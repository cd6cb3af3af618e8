package schema

import (
	"reflect"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
)

// Objects come after what they need; one that needs a table not copied,
// or an object not created, is reported, and so is what needs it.
func TestPlanObjects(t *testing.T) {
	obj := func(key string, needs ...dialect.Ref) dialect.SchemaObject {
		return dialect.SchemaObject{Object: dialect.Object{Kind: "view", Name: key, Key: key}, Step: dialect.Step{Name: key}, Needs: needs}
	}
	ref := func(key string) dialect.Ref { return dialect.Ref{Key: key, What: "view " + key} }
	got := PlanObjects([]dialect.SchemaObject{
		obj("fn"),
		obj("on_on_v", ref("on_v")),
		obj("on_v", ref("v"), ref("fn")),
		obj("v", ref("fn")),
		obj("on_lost", dialect.Ref{What: "table page_views"}),
		obj("on_on_lost", ref("on_lost")),
		obj("on_aggregate", dialect.Ref{Key: "agg", What: "function agg(integer)"}),
		obj("cycle_a", ref("cycle_b")),
		obj("cycle_b", ref("cycle_a")),
	})
	var order []string
	for _, s := range got.Steps {
		order = append(order, s.Name)
	}
	if want := []string{"fn", "v", "on_v", "on_on_v"}; !reflect.DeepEqual(order, want) {
		t.Errorf("created in the order %v, want %v", order, want)
	}
	reported := map[string]string{}
	for _, o := range got.Reported {
		reported[o.Key] = o.Note
	}
	want := map[string]string{
		"on_lost":      "needs table page_views, which the plan does not copy under its own name",
		"on_on_lost":   "needs view on_lost, which is not created",
		"on_aggregate": "needs function agg(integer), which is not created",
		"cycle_a":      "its dependencies form a cycle",
		"cycle_b":      "its dependencies form a cycle",
	}
	if !reflect.DeepEqual(reported, want) {
		t.Errorf("reported %v, want %v", reported, want)
	}
	for _, k := range order {
		if !got.Created[k] {
			t.Errorf("%s not in Created", k)
		}
	}
}

func TestSameName(t *testing.T) {
	for _, c := range []struct {
		src, dst []string
		want     bool
	}{
		{[]string{"public", "orders"}, []string{"public", "orders"}, true},
		{[]string{"public", "orders"}, []string{"orders"}, true},
		{[]string{"orders"}, []string{"orders"}, true},
		{[]string{"public", "orders"}, []string{"archive", "orders"}, false},
		{[]string{"public", "orders"}, []string{"orders_copy"}, false},
	} {
		if got := SameName(c.src, c.dst); got != c.want {
			t.Errorf("SameName(%v, %v) = %v, want %v", c.src, c.dst, got, c.want)
		}
	}
}
