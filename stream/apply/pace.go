package apply

import (
	"context"
	"errors"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/retry"
)

// groupTarget is how long one target transaction of the applier should
// take, and maxGroupFactor bounds its growth: each transaction costs
// round trips (begin, the fence check, the stream's row, commit) whatever
// it holds, so a backlog is applied in fewer, larger transactions — a few
// per second, far inside any lease.
const (
	groupTarget    = 100 * time.Millisecond
	maxGroupFactor = 8
)

// pace sizes the next groups from a committed one: a full group that
// took less than groupTarget doubles the size, one that took more than
// twice that halves it, never below MaxChanges.
func (a *Applier) pace(res Applied) {
	limit := a.limit.Load()
	switch {
	case res.Took > 2*groupTarget:
		a.limit.Store(max(limit/2, int64(a.MaxChanges)))
	case res.Took < groupTarget && int64(res.Changes) >= limit:
		a.limit.Store(min(limit*2, int64(a.MaxChanges)*maxGroupFactor))
	}
}

// retryKind is what a failed target transaction means for the next
// attempt at the same group, within the lease: a lock wait that timed out
// or a transaction that ran out of the lease's runway (waiting behind copy
// batches on a busy target) is tried again for up to MaxOutage, other
// failures up to MaxRetries times; a refused token, a stopped stream, a
// value the target refuses, an unavailable target and the lease's end are
// for the caller (the lease's loop waits out outages and takes the stream
// again).
func (a *Applier) retryKind(lctx context.Context) func(error) retry.Kind {
	return func(err error) retry.Kind {
		switch {
		case lctx.Err() != nil, errors.Is(err, ErrStopped), errors.Is(err, fence.ErrStale):
			return retry.Final
		case dialect.Classify(err) != dialect.Other:
			return retry.Final
		case dialect.LockTimeout(err), errors.Is(err, context.DeadlineExceeded):
			return retry.Outage
		}
		return retry.Failure
	}
}
