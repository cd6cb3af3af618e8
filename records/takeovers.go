// Package records keeps what holders publish about their shards in Redis
// beside the lease, under the lease's hash tag (so that a cluster keeps a
// shard's keys on one node): the takeover history, counted within a window
// (the runner halts a shard that keeps losing its holders) with the last
// takeover's details for status, and each holder's pace. A Redis that lost
// its data forgets them; neither is a condition of recovery. Keys, under a
// lease's base name (package lock):
//
//	base:takeovers      sorted set of takeover times (Redis clock), within a window
//	base:last_takeover  the last takeover's record, for status
//	base:progress       hash {owner, rows_per_sec, eta_ms, table_rows} the holder
//	                    publishes about once a second, expiring
package records

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed takeovers.lua
	takeoversLua    string
	takeoversScript = redis.NewScript(takeoversLua)
	//go:embed takeovers_read.lua
	takeoversReadLua    string
	takeoversReadScript = redis.NewScript(takeoversReadLua)
)

// Store reads and writes the records on a Redis client (go-redis: a
// client, a cluster or a failover client).
type Store struct{ rdb redis.Scripter }

// New is a Store on rdb.
func New(rdb redis.Scripter) *Store { return &Store{rdb: rdb} }

// checkBase refuses an empty lease name.
func checkBase(base string) error {
	if base == "" {
		return errors.New("records: empty lease name")
	}
	return nil
}

func takeoversKey(base string) string    { return base + ":takeovers" }
func lastTakeoverKey(base string) string { return base + ":last_takeover" }

// RecordTakeover notes a takeover of the lease named base with token, by
// the Redis server's clock, keeps record (the takeover's details, for
// status) for a day or the window if longer, and returns the number of
// takeovers within the window, this one included: the runner halts a shard
// that keeps losing its holders. A Redis that lost its data forgets them.
func (l *Store) RecordTakeover(ctx context.Context, base string, token int64, window time.Duration, record string) (int64, error) {
	return l.recordTakeover(ctx, base, strconv.FormatInt(token, 10), window, record)
}

func (l *Store) recordTakeover(ctx context.Context, base, token string, window time.Duration, record string) (int64, error) {
	if err := checkBase(base); err != nil {
		return 0, err
	}
	if window < time.Millisecond {
		return 0, fmt.Errorf("records: takeover window %v is below a millisecond", window)
	}
	keep := max(window, 24*time.Hour)
	n, err := takeoversScript.Run(ctx, l.rdb, []string{takeoversKey(base), lastTakeoverKey(base)},
		token, window.Milliseconds(), record, keep.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("records: record takeover of %s: %w", base, err)
	}
	return n, nil
}

// NoteTakeover replaces the last takeover's record, once its RTO is known,
// without counting another takeover.
func (l *Store) NoteTakeover(ctx context.Context, base string, window time.Duration, record string) error {
	_, err := l.recordTakeover(ctx, base, "", window, record)
	return err
}

// Takeovers reads what RecordTakeover kept: the number of takeovers of the
// lease named base within the window, and the last one's record ("" when
// none is kept).
func (l *Store) Takeovers(ctx context.Context, base string, window time.Duration) (int64, string, error) {
	if err := checkBase(base); err != nil {
		return 0, "", err
	}
	res, err := takeoversReadScript.Run(ctx, l.rdb, []string{takeoversKey(base), lastTakeoverKey(base)}, window.Milliseconds()).Slice()
	if err != nil {
		return 0, "", fmt.Errorf("records: read takeovers of %s: %w", base, err)
	}
	if len(res) < 1 {
		return 0, "", errors.New("records: read takeovers: short reply")
	}
	n, _ := res[0].(int64)
	rec := ""
	if len(res) > 1 {
		rec, _ = res[1].(string)
	}
	return n, rec, nil
}
