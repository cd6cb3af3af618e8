package batch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/keyset"
)

// page is one keyset page of the source, and its encoding for the bulk
// path (nil when it is written by upsert).
type page struct {
	rows [][]any
	bulk []byte
}

// pages reads the shard's pages after the key after, one page ahead of the
// writer, until the range ends, an error, or ctx ends. Each read is retried
// like a batch; the source's schema is checked every SchemaEvery, after a
// failed read and at the end of the range.
func (c *Copier) pages(ctx context.Context, spec Spec, keyIdx []int, after []any, encode func([][]any) []byte) *keyset.Ahead[page] {
	rd := c.Reader(spec)
	checked := time.Now()
	return keyset.Prefetch(ctx, 1, func(ctx context.Context) (page, bool, error) {
		var rows [][]any
		err := c.retry(ctx, spec, "read", func() (err error) {
			if c.SchemaCheck != nil && time.Since(checked) >= SchemaEvery {
				checked = time.Now()
				if err := c.SchemaCheck(ctx); err != nil {
					return permanent{fmt.Errorf("%w: %w", ErrHalted, err)}
				}
			}
			rows, err = c.readPage(ctx, rd, spec, after)
			return c.checkSchema(ctx, rows, err)
		})
		if err != nil || len(rows) == 0 {
			return page{}, false, err
		}
		after = keyset.KeyOf(rows[len(rows)-1], keyIdx)
		return page{rows: rows, bulk: encode(rows)}, true, nil
	})
}

// readPage reads one page; a value that cannot cross halts the shard,
// naming its row.
func (c *Copier) readPage(ctx context.Context, rd *keyset.Reader, spec Spec, after []any) ([][]any, error) {
	rows, err := rd.Page(ctx, after)
	var ce *keyset.ConvertError
	switch {
	case errors.As(err, &ce):
		return nil, permanent{fmt.Errorf("%w: %s: %w", ErrHalted, spec.Shard, ce)}
	case err != nil:
		return nil, fmt.Errorf("read %s after %v: %w", spec.Shard, after, err)
	}
	return rows, nil
}

// checkSchema checks the source's schema after a read that failed for a
// reason other than the database's availability (a dropped column fails
// the read) and at the end of the range, once more before the shard is
// done; a change halts the shard.
func (c *Copier) checkSchema(ctx context.Context, rows [][]any, err error) error {
	switch {
	case c.SchemaCheck == nil:
	case err != nil && dialect.Classify(err) == dialect.Other:
		if serr := c.SchemaCheck(ctx); serr != nil {
			return permanent{fmt.Errorf("%w: %w (%w)", ErrHalted, serr, err)}
		}
	case err == nil && len(rows) == 0:
		if serr := c.SchemaCheck(ctx); serr != nil {
			return permanent{fmt.Errorf("%w: %w", ErrHalted, serr)}
		}
	}
	return err
}
