// Package backoff is the one retry schedule of migrate: doubling from 500ms,
// capped at 10s, with jitter, so five retries ride out about 15s of outage.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Delay returns the wait before retry n (n >= 1): a random duration in
// [d/2, 3d/2) where d doubles from 500ms and is capped at 10s.
func Delay(n int) time.Duration {
	d := min(500*time.Millisecond<<min(max(n-1, 0), 5), 10*time.Second)
	return d/2 + rand.N(d)
}
