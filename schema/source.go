package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// SourceColumns returns the copied columns of a source table — the plan's
// list in its order, or every column but the fence column in the table's —
// and checks that the business key can drive a keyset copy: its columns
// exist, are NOT NULL, sort as they compare, and hold a unique index.
func SourceColumns(ctx context.Context, db Querier, d dialect.Dialect, t plans.Table, fenceColumn string) ([]dialect.Column, error) {
	all, err := Columns(ctx, db, d, t.SourceIdent())
	if errors.Is(err, ErrNoTable) {
		return nil, fmt.Errorf("%w: source table %s does not exist (or the source user cannot see it)", plans.ErrInvalid, t.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("source table %s: %w", t.Name, err)
	}
	byName := map[string]dialect.Column{}
	for _, c := range all {
		byName[c.Name] = c
	}
	var out []dialect.Column
	if t.Columns == nil {
		for _, c := range all {
			if c.Name != fenceColumn {
				out = append(out, c)
			}
		}
	} else {
		for _, n := range t.Columns {
			c, ok := byName[n]
			if !ok {
				return nil, fmt.Errorf("%w: source table %s has no column %q (listed in the plan's columns)", plans.ErrInvalid, t.Name, n)
			}
			out = append(out, c)
		}
	}
	if err := checkKey(d, t, byName); err != nil {
		return nil, err
	}
	// Equal keys split across two pages would be skipped after the first.
	uniq, err := UniqueIndexes(ctx, db, d, t.SourceIdent())
	if err != nil {
		return nil, fmt.Errorf("source table %s: %w", t.Name, err)
	}
	if !slices.ContainsFunc(uniq, func(cols []string) bool { return subset(cols, t.Key) }) {
		return nil, fmt.Errorf("%w: source table %s has no unique index or primary key within the key %v; the business key must be unique", plans.ErrInvalid, t.Name, t.Key)
	}
	return out, nil
}

// checkKey checks each key column exists, is NOT NULL (a NULL key part
// makes the keyset comparison NULL: such rows would be skipped silently)
// and sorts as it compares.
func checkKey(d dialect.Dialect, t plans.Table, byName map[string]dialect.Column) error {
	for _, k := range t.Key {
		c, ok := byName[k]
		if !ok {
			return fmt.Errorf("%w: source table %s has no key column %q", plans.ErrInvalid, t.Name, k)
		}
		if !c.NotNull {
			return fmt.Errorf("%w: key column %s.%s may be NULL; the business key must be NOT NULL", plans.ErrInvalid, t.Name, k)
		}
		if why := d.KeysetKey(c); why != "" {
			return fmt.Errorf("%w: key column %s.%s is %s; it cannot be a keyset key", plans.ErrInvalid, t.Name, k, why)
		}
	}
	return nil
}

// CheckMax checks the columns of the source table of t (def its
// definition) whose mapping toward engine to holds only for the values the
// source holds (typemap.NeedsMax: a MySQL bigint unsigned AUTO_INCREMENT
// becomes a PostgreSQL bigint identity), and which the plan gives no type:
// their largest value, read from the source, must fit.
func CheckMax(ctx context.Context, db Querier, d dialect.Catalog, to plans.Engine, t plans.Table, def *dialect.TableDef) error {
	for _, c := range def.Columns {
		col := c.Column
		col.Sequenced = c.Identity != ""
		if _, named := t.Types[c.Name]; named || !typemap.NeedsMax(def.Engine, to, col) {
			continue
		}
		var lo, hi sql.NullString
		if err := db.QueryRowContext(ctx, d.KeyBounds(t.SourceIdent(), c.Name)).Scan(&lo, &hi); err != nil {
			return fmt.Errorf("source table %s: largest %s: %w", t.Name, c.Name, err)
		}
		if err := typemap.MaxFits(t.Name, col, hi.String); err != nil {
			return err
		}
	}
	return nil
}
