// Package retry is migrate's one policy for trying again: a backoff schedule
// (doubling from 500ms, capped at 10s, with jitter, so five retries ride out
// about 15s of outage) and a budget that counts an operation's failures but
// waits out an outage — a database or Redis that cannot be reached — for a
// bounded time without counting it. Every retry loop of the program (start,
// setup, a shard's lease and takeover, a page read, a batch write) is one
// Budget.
package retry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Delay returns the wait before retry n (n >= 1): a random duration in
// [d/2, 3d/2) where d doubles from 500ms and is capped at 10s.
func Delay(n int) time.Duration { return Backoff(n, 500*time.Millisecond, 10*time.Second) }

// Backoff is the wait before attempt n+1 after n failures: base doubled
// per failure up to limit, with jitter (a random time between half and
// one and a half of it), so that many waiting clients do not come back
// in step.
func Backoff(n int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d)
}

// Kind is what a failed attempt means for the next one.
type Kind int

const (
	// Final: not tried again.
	Final Kind = iota
	// Failure: tried again after a backoff; counted against MaxFailures.
	Failure
	// Outage: a service was unavailable; tried again after a backoff for up
	// to MaxOutage from the outage's first failure, not counted.
	Outage
	// Now: tried again at once, not counted (the attempt itself was wrong,
	// e.g. a batch too large for the time left).
	Now
)

func (k Kind) String() string {
	return [...]string{"final", "failure", "outage", "now"}[k]
}

// Budget is one operation's allowance of failed attempts. The zero value
// allows none.
type Budget struct {
	// MaxFailures is how many failures in a row are tried again; the next
	// one spends the budget. An outage ends a run of failures.
	MaxFailures int
	// MaxOutage is how long an outage is waited out; 0: an outage counts
	// as a failure.
	MaxOutage time.Duration

	attempts, failures int
	since              time.Time // the current outage's first failure; zero when none
}

// Exhausted is a spent budget: the last error, and the failures in a row or
// the outage's length that spent it.
type Exhausted struct {
	Err      error
	Failures int           // > MaxFailures when failures spent it
	Outage   time.Duration // > MaxOutage when an outage spent it
}

func (e *Exhausted) Error() string {
	if e.Outage > 0 {
		return fmt.Sprintf("unavailable for %v: %v", e.Outage.Round(time.Second), e.Err)
	}
	return fmt.Sprintf("failed %d times: %v", e.Failures, e.Err)
}

func (e *Exhausted) Unwrap() error { return e.Err }

// Fail records a failed attempt of kind k (Failure or Outage) and returns
// the attempt's number and the wait before the next one, or an *Exhausted
// once the budget is spent.
func (b *Budget) Fail(err error, k Kind) (attempt int, wait time.Duration, ex *Exhausted) {
	if k == Outage && b.MaxOutage <= 0 {
		k = Failure
	}
	switch {
	case k == Failure:
		b.since = time.Time{}
		b.failures++
	case b.since.IsZero():
		b.since = time.Now()
	}
	if b.failures > b.MaxFailures {
		return b.attempts, 0, &Exhausted{Err: err, Failures: b.failures}
	}
	if k == Outage {
		if d := time.Since(b.since); d > b.MaxOutage {
			return b.attempts, 0, &Exhausted{Err: err, Outage: d}
		}
	}
	b.attempts++
	return b.attempts, Delay(min(b.attempts, 6)), nil
}

// Sleep waits d, or until ctx ends (then it returns ctx.Err()).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Do runs fn until it succeeds, kind calls its error Final (returned as
// is), the budget is spent (an *Exhausted), or ctx ends (ctx.Err()). Before
// each backoff, onRetry (if not nil) is told the error, its kind, the
// attempt's number and the wait.
func Do(ctx context.Context, b *Budget, fn func() error, kind func(error) Kind, onRetry func(err error, k Kind, attempt int, wait time.Duration)) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		k := kind(err)
		if k == Final {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if k == Now {
			continue
		}
		attempt, wait, ex := b.Fail(err, k)
		if ex != nil {
			return ex
		}
		if onRetry != nil {
			onRetry(err, k, attempt, wait)
		}
		if err := Sleep(ctx, wait); err != nil {
			return err
		}
	}
}
