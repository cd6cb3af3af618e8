package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
)

// sourceChanged reads the source table's copied columns again and reports
// how they differ from those the copy was set up with (j.src): a column
// added (when the plan copies every column), dropped, renamed or retyped,
// or the table gone. A failure to read the catalog is not a change (the
// read's own retries deal with an unreachable source).
func (r *Runner) sourceChanged(ctx context.Context, j shardJob) error {
	now, err := r.sourceColumns(ctx, j.table)
	if errors.Is(err, plans.ErrInvalid) {
		return fmt.Errorf("the source changed during the run: %w", err)
	}
	if err != nil {
		return nil
	}
	if diff := columnDiff(j.src, now); diff != "" {
		return fmt.Errorf("the source table %s changed during the run: %s; the copy was set up for the columns it had; check the target, then re-run under a new plan name or `migrate resume` once the source is back as it was", j.table.Name, diff)
	}
	return nil
}

// columnDiff describes how columns now differ from was ("" when equal).
func columnDiff(was, now []dialect.Column) string {
	before := map[string]dialect.Column{}
	for _, c := range was {
		before[c.Name] = c
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range now {
		seen[c.Name] = true
		b, ok := before[c.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("column %q added", c.Name))
		case b.Type != c.Type:
			out = append(out, fmt.Sprintf("column %q changed type from %s to %s", c.Name, b.Type, c.Type))
		case b.NotNull != c.NotNull:
			out = append(out, fmt.Sprintf("column %q changed nullability", c.Name))
		}
	}
	for _, c := range was {
		if !seen[c.Name] {
			out = append(out, fmt.Sprintf("column %q dropped", c.Name))
		}
	}
	return strings.Join(out, ", ")
}
