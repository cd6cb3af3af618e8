package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// Target is a target database being prepared for a plan whose source is
// of engine Source.
type Target struct {
	SQL         dialect.Dialect
	Source      plans.Engine
	FenceColumn string
}

// Table decides what the target table needs, changing nothing: when
// missing, a CREATE TABLE with the source's columns mapped to the target
// engine's types (C4); when present, every copied column and a unique index
// on the key, plus an ALTER TABLE adding the fence column if it lacks it
// (only then: it would queue behind a running holder's batches). It returns
// the target's definitions of the copied columns and the DDL to run, if any.
func (tg Target) Table(ctx context.Context, db Querier, t plans.Table, cols []dialect.Column) ([]dialect.Column, string, error) {
	ident := t.TargetIdent()
	existing, err := Columns(ctx, db, tg.SQL, ident)
	if errors.Is(err, ErrNoTable) {
		mapped, err := typemap.MapColumns(tg.Source, tg.SQL.Engine(), t.Name, cols, t.Key, t.Types)
		if err != nil {
			return nil, "", err
		}
		return mapped, tg.SQL.CreateTable(ident, mapped, t.Key, tg.FenceColumn), nil
	}
	if err != nil {
		return nil, "", err
	}
	dst, err := Align(existing, cols)
	if err != nil {
		return nil, "", err
	}
	if err := tg.checkUniqueKey(ctx, db, t); err != nil {
		return nil, "", err
	}
	if !slices.ContainsFunc(existing, func(c dialect.Column) bool { return c.Name == tg.FenceColumn }) {
		return dst, tg.SQL.AddFenceColumn(ident, tg.FenceColumn), nil
	}
	return dst, "", nil
}

// checkUniqueKey makes sure an existing target table has a unique index on
// exactly the business key, which the idempotent upsert needs — and no
// other, where the upsert matches any (a row could land on another row
// that shares only that index).
func (tg Target) checkUniqueKey(ctx context.Context, db Querier, t plans.Table) error {
	uniq, err := UniqueIndexes(ctx, db, tg.SQL, t.TargetIdent())
	if err != nil {
		return fmt.Errorf("unique keys of %s: %w", t.Target, err)
	}
	want := slices.Sorted(slices.Values(t.Key))
	found := false
	for _, cols := range uniq {
		if slices.Equal(slices.Sorted(slices.Values(cols)), want) {
			found = true
		} else if tg.SQL.UpsertMatchesAnyUnique() {
			return fmt.Errorf("%w: target table %s has a unique index on %v besides the key %v; MySQL's upsert would update whichever row it matches", plans.ErrInvalid, t.Target, cols, t.Key)
		}
	}
	if !found {
		return fmt.Errorf("%w: target table %s has no unique index on exactly the key %v; the idempotent upsert needs one", plans.ErrInvalid, t.Target, t.Key)
	}
	return nil
}

// StmtError names the statement that failed: DDL holds identifiers and
// types only, never a value.
func StmtError(what, stmt string, err error) error {
	return fmt.Errorf("%s: %w; the statement was:\n%s", what, err, stmt)
}
