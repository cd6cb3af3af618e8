package bench

import (
	"bufio"
	"context"
	"strconv"
	"strings"

	"github.com/migrate-dev/migrate/lock"
)

// Redis keys of a plan begin with lock.PlanPrefix (the lease, the token
// counter, …).

// delKeys deletes the Redis keys that match pattern.
func (b *Bench) delKeys(ctx context.Context, pattern string) error {
	it := b.svc.rdb.Scan(ctx, 0, pattern, 500).Iterator()
	var keys []string
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := b.svc.rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// delPlanKeys deletes every Redis key of plan name.
func (b *Bench) delPlanKeys(ctx context.Context, name string) error {
	return b.delKeys(ctx, lock.PlanPrefix(name)+"*")
}

// copyTokens gives plan to the token counters of plan from.
func (b *Bench) copyTokens(ctx context.Context, from, to string) error {
	prefix := lock.PlanPrefix(from)
	it := b.svc.rdb.Scan(ctx, 0, prefix+"*:token", 500).Iterator()
	for it.Next(ctx) {
		key := it.Val()
		v, err := b.svc.rdb.Get(ctx, key).Result()
		if err != nil {
			return err
		}
		if err := b.svc.rdb.Set(ctx, lock.PlanPrefix(to)+strings.TrimPrefix(key, prefix), v, 0).Err(); err != nil {
			return err
		}
	}
	return it.Err()
}

// commandCalls is, for every command the Redis server has run since it
// started, its number of calls (INFO commandstats).
func (b *Bench) commandCalls(ctx context.Context) (map[string]int64, error) {
	info, err := b.svc.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	return ParseCommandStats(info), nil
}

// ParseCommandStats reads the calls of each command from INFO
// commandstats ("cmdstat_get:calls=12,usec=…").
func ParseCommandStats(info string) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, stats, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		if n, err := strconv.ParseInt(calls, 10, 64); err == nil {
			out[strings.TrimPrefix(name, "cmdstat_")] = n
		}
	}
	return out
}

// CommandDelta is the calls made between two INFO commandstats, INFO left
// out, most called first.
func CommandDelta(before, after map[string]int64) []CommandCount {
	d := map[string]int64{}
	for k, v := range after {
		if k != "info" && v-before[k] > 0 {
			d[k] = v - before[k]
		}
	}
	return sortedCounts(d)
}

// redisVersion is the server's version.
func (b *Bench) redisVersion(ctx context.Context) string {
	info, err := b.svc.rdb.Info(ctx, "server").Result()
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}
