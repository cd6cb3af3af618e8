package schema

import (
	"context"
	"fmt"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
)

// AutoShardRows is the rows of a shard that `shards: auto` aims at: a
// table smaller than that is one shard.
const AutoShardRows = 250_000

// autoShardRows is AutoShardRows, smaller in tests.
var autoShardRows int64 = AutoShardRows

// AutoShards is the shard count `shards: auto` gives a table of rows rows:
// one shard per AutoShardRows rows, at most limit (AutoLimit).
func AutoShards(rows int64, limit int) int {
	n := int((rows + autoShardRows - 1) / autoShardRows)
	return min(max(n, 1), max(limit, 1), plans.MaxShards)
}

// AutoLimit is the most shards `shards: auto` gives one table on an
// instance of cores cores writing to target: two per core (at least
// four), so that one instance keeps its cores busy and a fleet has ranges
// to share — but one for a PostgreSQL target, where concurrent COPYs into
// one table were measured slower, not faster (docs/performance.md).
func AutoLimit(target plans.Engine, cores int) int {
	if target == plans.Postgres {
		return 1
	}
	return 2 * max(cores, 2)
}

// ShardBounds splits a source table into shards of about the same number
// of rows, at quantiles of the first key column: shard i holds lo_i < k1 <=
// hi_i, the first and last open. t.Shards 0 (`shards: auto`) chooses the
// count from the table's rows (AutoShards, at most limit), and leaves out a shard that
// would be empty (a first key column with few distinct values). More than
// one shard needs a first key column of integers or strings; under auto,
// another type gives one shard. The bounds are stored in the target by
// the first run and read back by every later one.
func ShardBounds(ctx context.Context, db Querier, d dialect.Dialect, t plans.Table, limit int) ([]dialect.Range, error) {
	if t.Shards == 1 || t.Shards == plans.ShardsAuto && limit <= 1 {
		return []dialect.Range{{}}, nil
	}
	var count int64
	if err := db.QueryRowContext(ctx, d.CountRows(t.SourceIdent())).Scan(&count); err != nil {
		return nil, fmt.Errorf("shard bounds of %s: %w", t.Name, err)
	}
	auto, n := t.Shards == plans.ShardsAuto, t.Shards
	if auto {
		if n = AutoShards(count, limit); n == 1 {
			return []dialect.Range{{}}, nil
		}
	}
	out := make([]dialect.Range, 0, n)
	if count == 0 {
		return append(out, make([]dialect.Range, n)...), nil // empty table: every shard open; the first copies nothing new
	}
	// Quantiles of the first key column, so that skewed keys split into
	// shards of about the same number of rows: shard i ends at the key of
	// row (i+1)·count/N in key order.
	var lo any
	for i := 0; i < n-1; i++ {
		pos := count * int64(i+1) / int64(n)
		var at any
		if err := db.QueryRowContext(ctx, d.KeyAt(t.SourceIdent(), t.Key[0]), max(pos-1, 0)).Scan(&at); err != nil {
			return nil, fmt.Errorf("shard bounds of %s: key at row %d: %w", t.Name, pos, err)
		}
		switch v := at.(type) {
		case int64, string:
		case []byte:
			at = string(v) // bound as text, compared in the column's collation, as the cursor's keys are
		default:
			if auto {
				return []dialect.Range{{}}, nil
			}
			return nil, fmt.Errorf("table %s: shards > 1 need a first key column of integers or strings; %q is a %T", t.Name, t.Key[0], at)
		}
		if auto && i > 0 && at == lo {
			continue // the same bound twice: no rows between
		}
		out = append(out, dialect.Range{Lo: lo, Hi: at})
		lo = at
	}
	return append(out, dialect.Range{Lo: lo}), nil
}
