package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
)

// ShardBounds splits a source table into shards of about the same number
// of rows, at quantiles of the first key column: shard i holds lo_i < k1 <=
// hi_i, the first and last open. More than one shard needs an integer
// first key column. The bounds are stored in the target by the first run
// and read back by every later one.
func ShardBounds(ctx context.Context, db Querier, d dialect.Dialect, t plans.Table) ([]dialect.Range, error) {
	if t.Shards <= 1 {
		return []dialect.Range{{}}, nil
	}
	var lo, hi sql.NullString
	if err := db.QueryRowContext(ctx, d.KeyBounds(t.SourceIdent(), t.Key[0])).Scan(&lo, &hi); err != nil {
		return nil, fmt.Errorf("shard bounds of %s: %w", t.Name, err)
	}
	out := make([]dialect.Range, t.Shards)
	if !lo.Valid {
		return out, nil // empty table: every shard open; the first copies nothing new
	}
	if _, err := strconv.ParseInt(lo.String, 10, 64); err != nil {
		return nil, fmt.Errorf("table %s: shards > 1 need an integer first key column; %q is not", t.Name, t.Key[0])
	}
	// Quantiles of the first key column, so that skewed keys split into
	// shards of about the same number of rows: shard i ends at the key of
	// row (i+1)·count/N in key order.
	var count int64
	if err := db.QueryRowContext(ctx, d.CountRows(t.SourceIdent())).Scan(&count); err != nil {
		return nil, fmt.Errorf("shard bounds of %s: %w", t.Name, err)
	}
	for i := range out {
		if i > 0 {
			out[i].Lo = out[i-1].Hi
		}
		if i == t.Shards-1 {
			break
		}
		var at int64
		pos := count * int64(i+1) / int64(t.Shards)
		if err := db.QueryRowContext(ctx, d.KeyAt(t.SourceIdent(), t.Key[0]), max(pos-1, 0)).Scan(&at); err != nil {
			return nil, fmt.Errorf("shard bounds of %s: key at row %d: %w", t.Name, pos, err)
		}
		out[i].Hi = at
	}
	return out, nil
}
