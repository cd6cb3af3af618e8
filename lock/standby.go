package lock

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/migrate-dev/migrate/internal/retry"
)

// Remaining is one question to a polling lock service: how long its lease
// base has left by the service's clock. held is false when no holder has
// it; left is 0 when the service cannot tell (a lease with no expiry).
type Remaining func(ctx context.Context) (left time.Duration, held bool, err error)

// PollFree is the standby wait of a service that is asked, not watched
// (Redis, a database): it asks ask until the lease is free, sleeping the
// shorter of poll ±20% jitter and the lease's remaining time, so a standby
// learns of the expiry from the service (L5), at most one poll late. It
// never decides by its own clock that the lease is free; errors are logged
// with log and polling goes on. It returns nil when the lease is free, or
// the context's error.
func PollFree(ctx context.Context, base string, poll time.Duration, log *slog.Logger, ask Remaining) error {
	for {
		left, held, err := ask(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sleep := Jitter(poll)
		switch {
		case err != nil:
			log.WarnContext(ctx, "lease poll failed", attrKey, base, attrErr, err)
		case !held:
			return nil
		case left > 0:
			sleep = max(min(sleep, left), time.Millisecond)
		default: // a lease with no expiry is not ours to fix (L3); keep waiting
			log.WarnContext(ctx, "lease has no expiry", attrKey, base)
		}
		if err := retry.Sleep(ctx, sleep); err != nil {
			return err
		}
	}
}

// Jitter returns d ±20%.
func Jitter(d time.Duration) time.Duration {
	return d - d/5 + time.Duration(rand.Int64N(int64(2*d/5)+1))
}
