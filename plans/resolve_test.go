package plans

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	found := []Found{
		{Name: []string{"public", "audit_log"}, Key: []string{"event_id"}},
		{Name: []string{"public", "customers"}, Key: []string{"id"}},
		{Name: []string{"public", "order_items"}, Key: []string{"order_id", "line_no"}},
		{Name: []string{"public", "page_views"}, NoKey: "no primary key and no unique index on NOT NULL columns"},
		{Name: []string{"sales", "customers"}, Key: []string{"id"}},
	}
	noLookup := func(name string) (Found, error) { return Found{}, errors.New("unexpected lookup of " + name) }
	plan := func(yaml string) *Plan {
		t.Helper()
		p, err := Parse("plan.yaml", []byte("name: p\nsource: postgres://u@h/db\ntarget: mysql://u@h/db\nredis: redis://h:6379/0\n"+yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	names := func(p *Plan) []string {
		var out []string
		for _, t := range p.Tables {
			out = append(out, t.Name+">"+t.Target+"/"+strings.Join(t.Key, ","))
		}
		return out
	}

	t.Run("every table but the excluded", func(t *testing.T) {
		p := plan("exclude: [page_views, 'sales.*', 'audit_*']\n")
		if err := p.Resolve(found, noLookup); err != nil {
			t.Fatal(err)
		}
		want := []string{"public.customers>customers/id", "public.order_items>order_items/order_id,line_no"}
		if got := names(p); !slices.Equal(got, want) {
			t.Fatalf("tables %v, want %v", got, want)
		}
	})
	t.Run("listed entries override what is found", func(t *testing.T) {
		p := plan("include: ['public.*']\nexclude: [page_views]\ntables:\n  - name: public.customers\n    target: clients\n    shards: 2\n")
		if err := p.Resolve(found, noLookup); err != nil {
			t.Fatal(err)
		}
		want := []string{"public.customers>clients/id", "public.audit_log>audit_log/event_id", "public.order_items>order_items/order_id,line_no"}
		if got := names(p); !slices.Equal(got, want) {
			t.Fatalf("tables %v, want %v", got, want)
		}
		if p.Tables[0].Shards != 2 {
			t.Fatalf("the listed entry's shards were lost: %+v", p.Tables[0])
		}
	})
	t.Run("a table without a key is refused by name", func(t *testing.T) {
		p := plan("include: ['public.*']\n")
		err := p.Resolve(found, noLookup)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "table public.page_views has no primary key") || !strings.Contains(err.Error(), `exclude: ["public.page_views"]`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("two sources for one target", func(t *testing.T) {
		p := plan("exclude: [page_views]\n")
		err := p.Resolve(found, noLookup)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "target table customers would be written by source tables public.customers and sales.customers") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("nothing matches", func(t *testing.T) {
		p := plan("include: ['nope_*']\n")
		if err := p.Resolve(found, noLookup); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no table of the source matches") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a listed table without a key takes the source's", func(t *testing.T) {
		p := plan("tables:\n  - name: other.t\n")
		if p.Discover {
			t.Fatal("a tables list alone discovers")
		}
		err := p.Resolve(nil, func(name string) (Found, error) {
			return Found{Name: []string{"other", "t"}, Key: []string{"k1", "k2"}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(p); !slices.Equal(got, []string{"other.t>t/k1,k2"}) {
			t.Fatalf("tables %v", got)
		}
	})
	t.Run("a bad pattern", func(t *testing.T) {
		_, err := Parse("plan.yaml", []byte("name: p\nsource: postgres://u@h/db\ntarget: mysql://u@h/db\nredis: redis://h:6379/0\ninclude: ['[a']\n"), nil)
		if err == nil || !strings.Contains(err.Error(), `plan.yaml:5:11: include pattern "[a" is not a glob`) {
			t.Fatalf("err = %v", err)
		}
	})
}
