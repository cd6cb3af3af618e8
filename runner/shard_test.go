package runner

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/lock"
)

// The shard's state machine: what each outcome of an attempt leads to.
func TestDecide(t *testing.T) {
	other := errors.New("checkpoint table missing")
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	lockWait := &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}
	cases := []struct {
		name string
		err  error
		next next
		kind retry.Kind
	}{
		{"done", nil, nextDone, retry.Final},
		{"held by another instance", &lock.HeldError{Owner: "b", Token: 7}, nextStandby, retry.Final},
		{"held, wrapped", fmt.Errorf("acquire: %w", &lock.HeldError{Owner: "b"}), nextStandby, retry.Final},
		{"failed before writing", errRetry{other}, nextBackoff, retry.Failure},
		{"any other error before writing", other, nextBackoff, retry.Failure},
		{"a database unavailable", errRetry{reset}, nextBackoff, retry.Outage},
		{"the claim waits for the old holder's transaction", errRetry{lockWait}, nextBackoff, retry.Outage},
		{"token still not above the watermark", errReclaim{watermark: 9}, nextBackoff, retry.Failure},
		{"the target lost committed batches", errRetry{errors.New("cursor moved")}, nextBackoff, retry.Failure},
		{"halted", fmt.Errorf("%w: %w", ErrHalted, batch.ErrHalted), nextStop, retry.Final},
		{"fenced by a newer token", fmt.Errorf("%w: %w", ErrFenced, &fence.StaleError{Token: 3, Watermark: 4}), nextStop, retry.Final},
		{"fenced: lease lost", fmt.Errorf("%w: %w", ErrFenced, errLeaseLost{batch.ErrLeaseLost, 3}), nextStop, retry.Final},
		{"lease lost to Redis, taken again", errRetry{fmt.Errorf("%w: %w", ErrFenced, errLeaseLost{batch.ErrLeaseLost, 3})}, nextBackoff, retry.Failure},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, k := decide(context.Background(), c.err)
			if n != c.next || k != c.kind {
				t.Errorf("decide(%v) = %v/%v, want %v/%v", c.err, n, k, c.next, c.kind)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n, _ := decide(ctx, errRetry{reset}); n != nextStop {
		t.Errorf("a cancelled run: %v, want stop", n)
	}
	if n, _ := decide(ctx, nil); n != nextDone {
		t.Errorf("done as the run is cancelled: %v, want done", n)
	}
}
