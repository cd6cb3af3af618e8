package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// fleet writes the fleet's Markdown table, then the Redis commands of the
// largest cell (most shards x instances) one by one.
func (rp *Report) fleet(w *errWriter) {
	c := rp.Config
	w.printf("\n### fleet: PG->PG, N instances of `migrate run -p PLAN --parallel ceil(S/N)` started at once\n\n")
	w.printf("%d rows; plan: shards S, lease_ttl %s, batch_size 1000; each instance --no-progress --json --no-verify.\n", c.Rows, c.FleetTTL)
	if c.Runs == 1 {
		w.printf("One run per cell (BENCH_RUNS=1): wall s and redis ops/s are that run's.\n")
	} else {
		w.printf("Medians over %d runs of copy s, wall s and redis ops/s; rows/s = rows / median copy s; rows per instance: each run's, runs separated by \" / \".\n", c.Runs)
	}
	w.printf("Redis ops: INFO commandstats after minus before the cell, INFO left out, server-wide (other clients of this Redis meanwhile count too).\n\n")
	w.printf("Copy s: from the first start to the last shard done; wall s: to the last exit.\n\n")
	w.printf("| shards | instances | copy s | wall s | rows/s | rows per instance | redis ops/s | redis ops/s per instance |\n")
	w.printf("|---:|---:|---:|---:|---:|---|---:|---:|\n")
	bigS, bigN := 0, 0
	for _, s := range c.FleetShards {
		for _, n := range c.FleetInstances {
			runs := rp.Results.Fleet(s, n)
			if len(runs) == 0 {
				reason := or(cut(rp.Results.Reason(fleetKey(s, n)), 100), "not run")
				w.printf("| %d | %d | n/a | n/a | n/a | %s | n/a | n/a |\n", s, n, strings.ReplaceAll(reason, "|", "/"))
				continue
			}
			if s*n >= bigS*bigN {
				bigS, bigN = s, n
			}
			w.printf("%s\n", fleetRow(s, n, c.Rows, runs))
		}
	}
	if bigS > 0 {
		fleetCommands(w, bigS, bigN, rp.Results.Fleet(bigS, bigN))
	}
}

// fleetKey is the key of a fleet cell's failures.
func fleetKey(s, n int) string { return fmt.Sprintf("fleet.s%d.i%d", s, n) }

// fleetRow is the table's line of one cell: medians over its runs.
func fleetRow(s, n, rows int, runs []FleetSample) string {
	var wall, cp, ops []float64
	var split []string
	for _, f := range runs {
		wall = append(wall, f.Wall)
		cp = append(cp, f.Copy)
		o := 0.0
		if f.Wall > 0 {
			o = float64(f.Ops()) / f.Wall
		}
		ops = append(ops, o)
		split = append(split, strings.Join(f.Rows, "+"))
	}
	mc, mw, mo := Median(cp).V, Median(wall).V, Median(ops).V
	rate := 0.0
	if mc > 0 {
		rate = float64(rows) / mc
	}
	return fmt.Sprintf("| %d | %d | %.2f | %.2f | %.0f | %s | %.1f | %.1f |",
		s, n, mc, mw, rate, strings.Join(split, " / "), mo, mo/float64(n))
}

// fleetCommands writes the Redis commands of one cell, summed over its runs.
func fleetCommands(w *errWriter, s, n int, runs []FleetSample) {
	var wall float64
	calls := map[string]int64{}
	var total int64
	for _, f := range runs {
		wall += f.Wall
		for _, c := range f.Commands {
			calls[c.Name] += c.Calls
			total += c.Calls
		}
	}
	w.printf("\nRedis commands of the largest cell (%d shards, %d instances), summed over its %d run(s) (%s s of wall time):\n\n",
		s, n, len(runs), strconv.FormatFloat(math.Round(wall*1000)/1000, 'f', -1, 64))
	w.printf("| command | calls | calls/s | calls/s per instance |\n")
	w.printf("|---|---:|---:|---:|\n")
	per := func(c int64) (float64, float64) {
		if wall <= 0 {
			return 0, 0
		}
		return float64(c) / wall, float64(c) / wall / float64(n)
	}
	for _, c := range sortedCounts(calls) {
		a, b := per(c.Calls)
		w.printf("| %s | %d | %.1f | %.2f |\n", c.Name, c.Calls, a, b)
	}
	a, b := per(total)
	w.printf("| total | %d | %.1f | %.2f |\n", total, a, b)
}

// sortedCounts are the counts of m, most calls first, then by name.
func sortedCounts(m map[string]int64) []CommandCount {
	out := make([]CommandCount, 0, len(m))
	for k, v := range m {
		out = append(out, CommandCount{k, v})
	}
	slices.SortFunc(out, func(a, b CommandCount) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), strings.Compare(a.Name, b.Name))
	})
	return out
}
