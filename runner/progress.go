package runner

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/records"
)

// rate is what this instance measures of a shard it holds, for status.
type rate struct {
	owner    string
	rows     int64 // rows committed since the lease was taken
	lastRows int64
	lastAt   time.Time
	perSec   float64 // smoothed
}

// publishEvery is how often a holder publishes its shards' pace to the target.
const publishEvery = time.Second

// startRate begins measuring a shard this instance now holds.
func (r *Runner) startRate(s fence.Shard, lease hold.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rates[s] = &rate{owner: lease.Owner(), lastAt: time.Now()}
}

// stopRate ends it, when the shard is done or the lease given back.
func (r *Runner) stopRate(s fence.Shard) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.rates, s)
}

// publishRates publishes, every publishEvery until ctx ends, each held
// shard's rows per second (smoothed over the last seconds) and the time
// left at that rate, kept in the target for one lease TTL.
func (r *Runner) publishRates(ctx context.Context) {
	tick := time.NewTicker(publishEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		type pub struct {
			s fence.Shard
			p records.Progress
		}
		var pubs []pub
		now := time.Now()
		r.mu.Lock()
		for s, rt := range r.rates {
			dt := now.Sub(rt.lastAt).Seconds()
			if dt <= 0 {
				continue
			}
			inst := float64(rt.rows-rt.lastRows) / dt
			if rt.perSec == 0 {
				rt.perSec = inst
			} else {
				rt.perSec = 0.5*rt.perSec + 0.5*inst
			}
			rt.lastRows, rt.lastAt = rt.rows, now
			eta := int64(-1)
			if rt.perSec > 0 {
				eta = int64(float64(r.left[s]) / rt.perSec * 1000)
			}
			pubs = append(pubs, pub{s, records.Progress{Owner: rt.owner, RowsPerSec: rt.perSec, EtaMs: eta, TableRows: r.tableRows[s.Table]}})
		}
		r.mu.Unlock()
		for _, p := range pubs {
			pctx, cancel := context.WithTimeout(ctx, publishEvery/2)
			if err := r.records.PublishProgress(pctx, p.s, p.p, r.plan.LeaseTTL); err != nil {
				r.log.Debug("progress not published", "shard", p.s.String(), "err", err)
			}
			cancel()
		}
	}
}

// describe names the copy's progress per table on the progress bar: shards
// done of each table's shards.
func (r *Runner) describe() {
	d, ok := r.opts.Progress.(interface{ Describe(string) })
	if !ok {
		return
	}
	r.mu.Lock()
	done := map[string]int{}
	for _, s := range r.report.Shards {
		if s.State == "done" {
			done[s.Table]++
		}
	}
	r.mu.Unlock()
	var parts []string
	for _, t := range r.plan.Tables {
		parts = append(parts, fmt.Sprintf("%s %d/%d", t.Name, done[t.Name], t.Shards))
	}
	sort.Strings(parts)
	d.Describe("copying (shards done: " + strings.Join(parts, ", ") + ")")
}
