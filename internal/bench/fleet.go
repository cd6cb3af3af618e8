package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// fleetPlan is the plan of a fleet cell. The DSNs come from the
// environment (${…} expansion), not the file or argv.
const fleetPlan = `name: {NAME}
source: ${MBENCH_SOURCE}
target: ${MBENCH_TARGET}
redis: ${MBENCH_REDIS}
lease_ttl: {TTL}
batch_size: 1000
tables:
  - name: orders
    key: [id]
    shards: {SHARDS}
`

// fleetCells measures every cell of shards x instances, once.
func (b *Bench) fleetCells(ctx context.Context) error {
	for _, s := range b.cfg.FleetShards {
		for _, n := range b.cfg.FleetInstances {
			b.logf("fleet: %d shard(s), %d instance(s)", s, n)
			if err := b.fleetCell(ctx, s, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// fleetCell starts n instances of `migrate run` of one plan with s shards
// at once (--parallel ceil(s/n), so the shards divide among them) and
// records the copy time (to the last shard's done commit), the wall time
// (to the last exit), each one's rows_written and the Redis commands
// meanwhile. Every instance must exit 0 and the target hold every row.
func (b *Bench) fleetCell(ctx context.Context, s, n int) error {
	key := fleetKey(s, n)
	name := fmt.Sprintf("%s-fleet-s%d-i%d-%d", b.tag, s, n, b.run)
	if err := b.svc.Fresh(ctx, PG, dstDB); err != nil {
		return err
	}
	if err := b.delPlanKeys(ctx, name); err != nil {
		return err
	}
	plan := filepath.Join(b.work, name+".yaml")
	text := strings.NewReplacer("{NAME}", name, "{TTL}", b.cfg.FleetTTL, "{SHARDS}", strconv.Itoa(s)).Replace(fleetPlan)
	if err := os.WriteFile(plan, []byte(text), 0o600); err != nil {
		return err
	}
	before, err := b.commandCalls(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	bad, rows := b.fleetRun(ctx, name, plan, s, n)
	wall := seconds(t0)
	after, err := b.commandCalls(ctx)
	if err != nil {
		return err
	}
	if err := b.delPlanKeys(ctx, name); err != nil {
		return err
	}
	if bad != "" {
		b.fail(key, bad)
		return nil
	}
	var count int
	if err := b.svc.Scan(ctx, PG, dstDB, "SELECT count(*) FROM orders", &count); err != nil {
		return err
	}
	if count != b.cfg.Rows {
		b.fail(key, fmt.Sprintf("the target has %d rows, not %d", count, b.cfg.Rows))
		return nil
	}
	var done float64
	err = b.svc.Scan(ctx, PG, dstDB, "SELECT extract(epoch FROM max(updated_at))::float8 FROM _migrate_checkpoint WHERE plan = '"+name+"'", &done)
	if err != nil {
		return err
	}
	f := FleetSample{Shards: s, Instances: n, Run: b.run, Wall: wall, Rows: rows,
		Copy: done - float64(t0.UnixMicro())/1e6, Commands: CommandDelta(before, after)}
	b.record(key, wall, 0)
	b.res.RecordFleet(f)
	b.logf("  %s: copy %.3f s, wall %.3f s, rows per instance %s, %d Redis commands (%.1f/s)",
		key, f.Copy, wall, strings.Join(rows, " "), f.Ops(), float64(f.Ops())/wall)
	return nil
}

// fleetRun runs the n instances of a cell at once and waits for all; bad
// is why the first one that failed did, rows each one's rows_written.
func (b *Bench) fleetRun(ctx context.Context, name, plan string, s, n int) (bad string, rows []string) {
	env := []string{"MBENCH_SOURCE=" + b.svc.URL(PG, srcDB), "MBENCH_TARGET=" + b.svc.URL(PG, dstDB), "MBENCH_REDIS=" + b.svc.RedisURL()}
	parallel := strconv.Itoa((s + n - 1) / n)
	cmds := make([]*exec.Cmd, n)
	errs := make([]error, n)
	closers := make([]func(), n)
	for i := range n {
		out := fmt.Sprintf("%s.%d", name, i+1)
		cmd, done, err := b.migrateCmd(ctx, out, env, "run", "-p", plan, "--instance", fmt.Sprintf("fleet-%d", i+1),
			"--parallel", parallel, "--no-progress", "--json", "--no-verify")
		if err == nil {
			err = cmd.Start()
		}
		cmds[i], errs[i], closers[i] = cmd, err, done
	}
	for i, cmd := range cmds {
		if errs[i] == nil {
			errs[i] = cmd.Wait()
		}
		if closers[i] != nil {
			closers[i]()
		}
	}
	for i := range n {
		out := filepath.Join(b.work, fmt.Sprintf("%s.%d", name, i+1))
		res, jerr := readRunResult(out + ".json")
		if errs[i] != nil && bad == "" {
			why := "error: " + res.Error
			if jerr != nil || res.Error == "" {
				why = lastLineOf(out + ".log")
			}
			bad = fmt.Sprintf("instance fleet-%d exit %d: %s", i+1, exitCode(errs[i]), why)
		}
		r := "?"
		if jerr == nil {
			r = strconv.FormatInt(res.RowsWritten, 10)
		}
		rows = append(rows, r)
	}
	return bad, rows
}
