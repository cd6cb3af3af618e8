package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
)

// Resolve sets a plan's tables from its source (plans.Plan.Resolve): the
// base tables discovery finds, when the plan discovers, and the key of
// every table the plan gives none.
func Resolve(ctx context.Context, db dialect.Querier, d dialect.Dialect, p *plans.Plan) error {
	var found []plans.Found
	if p.Discover {
		names, err := d.ListTables(ctx, db)
		if err != nil {
			return fmt.Errorf("list the source's tables: %w", err)
		}
		for _, n := range names {
			f, err := find(ctx, db, d, n)
			if err != nil {
				return err
			}
			found = append(found, f)
		}
	}
	return p.Resolve(found, func(name string) (plans.Found, error) {
		return find(ctx, db, d, strings.SplitN(name, ".", 2))
	})
}

// find reads a source table's default key.
func find(ctx context.Context, db dialect.Querier, d dialect.Dialect, name []string) (plans.Found, error) {
	def, err := d.ReadTable(ctx, db, name)
	if errors.Is(err, dialect.ErrNoTable) {
		return plans.Found{}, fmt.Errorf("%w: source table %s does not exist (or the source user cannot see it)", plans.ErrInvalid, strings.Join(name, "."))
	}
	if err != nil {
		return plans.Found{}, fmt.Errorf("source table %s: %w", strings.Join(name, "."), err)
	}
	f := plans.Found{Name: def.Name, Key: DefaultKey(def)}
	if f.Key == nil {
		f.NoKey = "no primary key and no unique index on NOT NULL columns"
	}
	return f, nil
}

// DefaultKey is the key a table is copied by when the plan names none: its
// primary key, else its unique index of plain NOT NULL columns (no
// predicate, no expression, no prefix) with the fewest columns, then the
// first by name; nil when it has neither.
func DefaultKey(def *dialect.TableDef) []string {
	if def.PrimaryKey != nil {
		return def.PrimaryKey.Columns()
	}
	notNull := map[string]bool{}
	for _, c := range def.Columns {
		notNull[c.Name] = c.NotNull && c.Generated == ""
	}
	var best *dialect.Index
	for i, x := range def.Indexes {
		if !x.Unique || x.Where != "" || len(x.Parts) == 0 {
			continue
		}
		if slices.ContainsFunc(x.Parts, func(p dialect.IndexPart) bool { return p.Column == "" || p.Prefix > 0 || !notNull[p.Column] }) {
			continue
		}
		if best == nil || len(x.Parts) < len(best.Parts) || len(x.Parts) == len(best.Parts) && x.Name < best.Name {
			best = &def.Indexes[i]
		}
	}
	if best == nil {
		return nil
	}
	return best.Columns()
}
