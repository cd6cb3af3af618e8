package plans

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Found is a source table as the source's catalog describes it: its name
// ([schema, table] on PostgreSQL, [table] on MySQL) and the key a plan
// takes by default — its primary key, else a unique index on NOT NULL
// columns — or none, with NoKey saying what it lacks.
type Found struct {
	Name  []string
	Key   []string
	NoKey string // why Key is nil
}

func (f Found) name() string { return strings.Join(f.Name, ".") }

// Resolve sets the plan's tables once its source is known. With Discover,
// found are every base table of the source: those matching Include (all
// when it is empty) and no Exclude pattern are copied, each listed table
// overriding the found one it names (by "schema.table" or by its bare
// name) and every listed table copied whether it matches or not. Without
// Discover the tables are the listed ones. A table without a key takes the
// found one (lookup finds a listed table that discovery did not list). A
// table that has no key to take is an error naming it and what to do; so
// is a discovery that finds nothing.
func (p *Plan) Resolve(found []Found, lookup func(name string) (Found, error)) error {
	byName := map[string]int{}
	bare := map[string][]int{}
	for i, f := range found {
		byName[f.name()] = i
		bare[f.Name[len(f.Name)-1]] = append(bare[f.Name[len(f.Name)-1]], i)
	}
	match := func(name string) (int, bool) {
		if i, ok := byName[name]; ok {
			return i, true
		}
		if m := bare[name]; len(m) == 1 {
			return m[0], true
		}
		return 0, false
	}
	var tables []Table
	listed := map[int]bool{}
	for _, t := range p.Tables {
		if i, ok := match(t.Name); ok {
			listed[i] = true
			if t.Key == nil {
				if found[i].Key == nil {
					return keyless([]Found{found[i]})
				}
				t.Key = slices.Clone(found[i].Key)
			}
		} else if t.Key == nil {
			f, err := lookup(t.Name)
			if err != nil {
				return err
			}
			if f.Key == nil {
				return keyless([]Found{{Name: splitIdent(t.Name), NoKey: f.NoKey}})
			}
			t.Key = f.Key
		}
		tables = append(tables, t)
	}
	if p.Discover {
		var noKey []Found
		for i, f := range found {
			if listed[i] || !p.selects(f.Name) {
				continue
			}
			if f.Key == nil {
				noKey = append(noKey, f)
				continue
			}
			tables = append(tables, Table{Name: f.name(), Target: p.discoveredTarget(f.Name), Key: f.Key, Shards: DefaultShards})
		}
		if len(noKey) > 0 {
			return keyless(noKey)
		}
		if len(tables) == 0 {
			return fmt.Errorf("%w: no table of the source matches include %q and exclude %q (the source has %d base tables)", ErrInvalid, p.Include, p.Exclude, len(found))
		}
	}
	seen := map[string]string{}
	for _, t := range tables {
		if other, dup := seen[t.Target]; dup {
			return fmt.Errorf("%w: target table %s would be written by source tables %s and %s; give one of them a target: in the plan's tables", ErrInvalid, t.Target, other, t.Name)
		}
		seen[t.Target] = t.Name
	}
	p.Tables, p.resolved = tables, true
	return nil
}

// Unresolved reports whether the plan's tables are still to be found in
// its source (Resolve): it discovers, or a table has no key yet.
func (p *Plan) Unresolved() bool {
	return !p.resolved && (p.Discover || slices.ContainsFunc(p.Tables, func(t Table) bool { return t.Key == nil }))
}

// selects reports whether discovery copies a table: it matches an include
// pattern (or there are none) and no exclude pattern.
func (p *Plan) selects(name []string) bool {
	matches := func(pats []string) bool {
		for _, pat := range pats {
			subject := name[len(name)-1]
			if strings.Contains(pat, ".") {
				subject = strings.Join(name, ".")
			}
			if ok, _ := path.Match(pat, subject); ok {
				return true
			}
		}
		return false
	}
	return (len(p.Include) == 0 || matches(p.Include)) && !matches(p.Exclude)
}

// discoveredTarget names a found table's target: the same name, without
// its schema on a MySQL target (whose database is the DSN's).
func (p *Plan) discoveredTarget(name []string) string {
	if p.Target.Engine() == MySQL {
		return name[len(name)-1]
	}
	return strings.Join(name, ".")
}

// keyless is the error for tables no key can be taken for.
func keyless(fs []Found) error {
	lines := make([]string, len(fs))
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = fmt.Sprintf("%q", f.name())
		lines[i] = fmt.Sprintf("table %s has %s", f.name(), f.NoKey)
	}
	return fmt.Errorf("%w: %s: a keyset copy needs a primary key or a unique index on NOT NULL columns; add one to the source table, or leave the table out (exclude: [%s])",
		ErrInvalid, strings.Join(lines, "; "), strings.Join(names, ", "))
}
