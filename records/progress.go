package records

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed progress.lua
	progressLua    string
	progressScript = redis.NewScript(progressLua)
	// progressReadScript is HGETALL through EVAL: RedisClient is scripts only.
	progressReadScript = redis.NewScript(`return redis.call('HGETALL', KEYS[1])`)
)

func progressKey(base string) string { return base + ":progress" }

// Progress is what the holder of a shard publishes about its pace, for
// status: it expires unless published again.
type Progress struct {
	Owner      string  // the holder that measured it
	RowsPerSec float64 // rows committed per second, smoothed
	EtaMs      int64   // time left for the shard at that rate; -1 unknown
	TableRows  int64   // the source's estimate of the whole table's rows
}

// PublishProgress replaces the progress record of the lease named base,
// kept for keep.
func (l *Store) PublishProgress(ctx context.Context, base string, p Progress, keep time.Duration) error {
	if err := checkBase(base); err != nil {
		return err
	}
	err := progressScript.Run(ctx, l.rdb, []string{progressKey(base)}, max(keep.Milliseconds(), 1),
		"owner", p.Owner, "rows_per_sec", strconv.FormatFloat(p.RowsPerSec, 'f', 1, 64),
		"eta_ms", p.EtaMs, "table_rows", p.TableRows).Err()
	if err != nil {
		return fmt.Errorf("records: publish progress of %s: %w", base, err)
	}
	return nil
}

// ReadProgress reads what PublishProgress kept; ok is false when nothing is
// (no holder published within its keep time).
func (l *Store) ReadProgress(ctx context.Context, base string) (p Progress, ok bool, err error) {
	if err := checkBase(base); err != nil {
		return p, false, err
	}
	res, err := progressReadScript.Run(ctx, l.rdb, []string{progressKey(base)}).StringSlice()
	if err != nil {
		return p, false, fmt.Errorf("records: read progress of %s: %w", base, err)
	}
	for i := 0; i+1 < len(res); i += 2 {
		switch v := res[i+1]; res[i] {
		case "owner":
			p.Owner, ok = v, true
		case "rows_per_sec":
			p.RowsPerSec, _ = strconv.ParseFloat(v, 64)
		case "eta_ms":
			p.EtaMs, _ = strconv.ParseInt(v, 10, 64)
		case "table_rows":
			p.TableRows, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return p, ok, nil
}
