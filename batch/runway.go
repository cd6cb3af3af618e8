package batch

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
)

// runwaySlack is the runway a batch needs beyond twice its expected time.
const runwaySlack = 20 * time.Millisecond

// pace is what a shard's writer knows of how long its writes take and of
// the runway its lease gives: the time left before the lease's local
// deadline, which a renewal moves forward.
type pace struct {
	perRow   time.Duration // a batch's write time per row, moving average; 0 before the first
	runway   time.Duration // the runway a batch can count on: the longest seen, until lowered
	lowered  bool          // runway was lowered to what renewals give now
	deadline time.Time     // the deadline at the last look
	piece    int           // rows in a batch when a page does not fit the runway; 0 while pages fit
}

// need is the runway a batch of n rows must have before it starts (L2):
// twice its expected write time, plus runwaySlack.
func (p *pace) need(n int) time.Duration {
	return 2*p.perRow*time.Duration(n) + runwaySlack
}

// fits is how many rows the runway can carry.
func (p *pace) fits() int {
	if p.perRow == 0 {
		return math.MaxInt
	}
	return int((p.runway - runwaySlack) / (2 * p.perRow))
}

// wrote records a committed batch of n rows that took d.
func (p *pace) wrote(n int, d time.Duration) {
	r := d / time.Duration(n)
	if p.perRow == 0 {
		p.perRow = r
	} else {
		p.perRow = (p.perRow*7 + r) / 8
	}
}

// failed records a failed attempt at a batch of n rows that ran for d with
// left of runway when it began: one that used half of it or more is taken
// as too slow for it (the lease's deadline or the server's bound may have
// cut it). It reports whether the next attempt will be smaller for it.
func (p *pace) failed(n int, d, left time.Duration) bool {
	if d < left/2 {
		return false
	}
	p.perRow = max(p.perRow, d/time.Duration(n))
	return p.fits() < n
}

// smaller is a failed attempt at a batch too large for the runway; the
// next attempt is smaller, so it is tried again at once and not counted
// against max_retries (the batch shrinks each time: this ends).
type smaller struct{ err error }

func (s smaller) Error() string { return s.err.Error() }
func (s smaller) Unwrap() error { return s.err }

// runway waits until a batch can commit before the lease's local deadline
// and returns how many of the n rows it may hold: all, unless the runway a
// renewal gives cannot carry them (a batch taking more than about 0.45 ×
// lease_ttl), then as many as it can. Waiting for a runway that never
// comes would keep the lease renewed with nothing written and no standby
// able to take over, so a wait that has seen two renewals without enough
// runway counts on 80% of the longest it saw since (renewals under load
// come back later, giving less than the first grant did) and shrinks the
// batch to that; a shard where not even one row fits halts.
func (c *Copier) runway(ctx context.Context, spec Spec, lease fence.Lease, n int, p *pace) (int, error) {
	lctx := lease.Context()
	var seen time.Duration // the longest runway seen in this wait
	renewals, stalled := 0, false
	for {
		d := lease.Deadline()
		if !p.deadline.IsZero() && d.After(p.deadline) {
			renewals++
		}
		p.deadline = d
		left := time.Until(d)
		seen = max(seen, left)
		if !p.lowered {
			p.runway = max(p.runway, left)
		}
		if renewals >= 2 && left < p.need(max(min(n, p.fits()), 1)) {
			p.runway, p.lowered, renewals, stalled = seen*8/10, true, 0, true
		}
		if m := p.fits(); m < n {
			if m < 1 {
				if stalled {
					return 0, permanent{fmt.Errorf("%w: %s: writing one row takes about %v and a batch starts only with twice its time left before the lease's local deadline, which renewals put at most %v ahead: raise lease_ttl",
						hold.ErrHalted, spec.Shard, p.perRow.Round(time.Microsecond), seen.Round(time.Millisecond))}
				}
			} else {
				n = m
				if p.piece == 0 && c.Log != nil {
					c.Log.Warn("a batch does not fit the lease's runway; writing smaller batches (raise lease_ttl or lower batch_size)",
						"shard", spec.Shard.String(), "batch_size", spec.BatchSize, "rows", m,
						"per_row", p.perRow, "runway", p.runway.Round(time.Millisecond))
				}
				p.piece = m
			}
		}
		if left >= p.need(n) {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return 0, permanent{ctx.Err()}
		case <-lctx.Done():
			return 0, permanent{lost(ctx, lctx)}
		case <-time.After(10 * time.Millisecond):
		}
	}
}
