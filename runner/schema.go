package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/schema"
)

// sourceChanged reads the source table's copied columns again and reports
// how they differ from those the copy was set up with (w.j.read): a column
// added (when the plan copies every column), dropped, renamed or retyped,
// or the table gone. A failure to read the catalog is not a change (the
// read's own retries deal with an unreachable source).
func (w *shardWork) sourceChanged(ctx context.Context) error {
	r, j := w.r, w.j
	now, err := schema.SourceColumns(ctx, r.src, r.srcD, j.table, r.plan.FenceColumn)
	if errors.Is(err, plans.ErrInvalid) {
		return fmt.Errorf("the source changed during the run: %w", err)
	}
	if err != nil {
		return nil
	}
	if diff := schema.Diff(j.read, now); diff != "" {
		return fmt.Errorf("the source table %s changed during the run: %s; the copy was set up for the columns it had; check the target, then re-run under a new plan name or `migrate resume` once the source is back as it was", j.table.Name, diff)
	}
	return nil
}
