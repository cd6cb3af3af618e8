package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/plans"
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

// pace is the copy's pace as this instance sees it: each shard's backlog,
// and the rate of the shards it holds, published for status. Its mutex
// guards only its own state (the report has the Runner's).
type pace struct {
	plan    *plans.Plan
	records *records.Store
	log     *slog.Logger

	mu   sync.Mutex
	left map[fence.Shard]int64 // rows left to copy, estimated, for the backlog metric
	// tableRows is the source's estimate of each table's rows (by target
	// name); rates the pace of the shards this instance holds.
	tableRows map[string]int64
	rates     map[fence.Shard]*rate
}

// setBacklog sets each shard's rows left and each table's estimated rows.
func (p *pace) setBacklog(left map[fence.Shard]int64, tableRows map[string]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.left, p.tableRows = left, tableRows
}

// committed counts rows committed by shard s, and returns its backlog left.
func (p *pace) committed(s fence.Shard, rows int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	left := max(p.left[s]-rows, 0)
	if p.left != nil {
		p.left[s] = left
	}
	if rt := p.rates[s]; rt != nil {
		rt.rows += rows
	}
	return left
}

// start begins measuring a shard this instance now holds.
func (p *pace) start(s fence.Shard, lease hold.Lease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rates[s] = &rate{owner: lease.Owner(), lastAt: time.Now()}
}

// stop ends it, when the shard is done or the lease given back.
func (p *pace) stop(s fence.Shard) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.rates, s)
}

// publish publishes, every publishEvery until ctx ends, each held
// shard's rows per second (smoothed over the last seconds) and the time
// left at that rate, kept in the target for one lease TTL.
func (p *pace) publish(ctx context.Context) {
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
			p records.Pace
		}
		var pubs []pub
		now := time.Now()
		p.mu.Lock()
		for s, rt := range p.rates {
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
				eta = int64(float64(p.left[s]) / rt.perSec * 1000)
			}
			pubs = append(pubs, pub{s, records.Pace{Owner: rt.owner, RowsPerSec: rt.perSec, EtaMs: eta, TableRows: p.tableRows[s.Table]}})
		}
		p.mu.Unlock()
		for _, pb := range pubs {
			pctx, cancel := context.WithTimeout(ctx, publishEvery/2)
			if err := p.records.PublishPace(pctx, pb.s, pb.p, p.plan.LeaseTTL); err != nil {
				p.log.Debug("progress not published", "shard", pb.s.String(), "err", err)
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
