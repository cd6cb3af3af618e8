package batch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/internal/retry"
)

// permanent marks an error that retrying cannot fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// retry runs fn until it succeeds, fails permanently, or fails
// spec.MaxRetries+1 times in a row; then it returns hold.ErrHalted with the last
// error. A database that is unavailable (dialect.Unavailable) is waited
// for up to spec.MaxOutage from its first such failure without counting
// attempts; a batch that did not fit the lease's runway is tried again at
// once, smaller (retry.Budget).
func (c *Copier) retry(ctx context.Context, spec Spec, what string, fn func() error) error {
	sh := spec.Shard
	kind := func(err error) retry.Kind {
		switch {
		case errors.As(err, new(permanent)):
			return retry.Final
		case errors.As(err, new(smaller)):
			return retry.Now
		case dialect.Classify(err) == dialect.Unavailable:
			return retry.Outage
		}
		return retry.Failure
	}
	onRetry := func(err error, k retry.Kind, attempt int, wait time.Duration) {
		if c.OnFailure != nil {
			c.OnFailure(sh, err)
		}
		if c.Log != nil {
			msg := "batch failed, retrying"
			if k == retry.Outage {
				msg = "database unavailable, retrying"
			}
			c.Log.Warn(msg, "shard", sh.String(), "op", what, "attempt", attempt, "backoff", wait, "err", err)
		}
	}
	err := retry.Do(ctx, &retry.Budget{MaxFailures: spec.MaxRetries, MaxOutage: spec.MaxOutage}, func() error {
		err := fn()
		if s := (smaller{}); errors.As(err, &s) && c.Log != nil {
			c.Log.Info("the batch did not fit the lease's runway; trying a smaller one", "shard", sh.String(), "err", s.err)
		}
		return err
	}, kind, onRetry)
	var p permanent
	var ex *retry.Exhausted
	switch {
	case errors.As(err, &p):
		return p.err
	case errors.As(err, &ex) && ex.Outage > 0:
		if c.OnFailure != nil {
			c.OnFailure(sh, ex.Err)
		}
		return fmt.Errorf("%w: %s %s: the database has been unavailable for %v (max %v): %w", hold.ErrHalted, what, sh, ex.Outage.Round(time.Second), spec.MaxOutage, ex.Err)
	case errors.As(err, &ex):
		if c.OnFailure != nil {
			c.OnFailure(sh, ex.Err)
		}
		return fmt.Errorf("%w: %s %s failed %d times: %w", hold.ErrHalted, what, sh, ex.Failures, ex.Err)
	}
	return err
}
