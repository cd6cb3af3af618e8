package batch

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/keyset"
)

// page is one keyset page of the source, and its encoding for the bulk
// path (nil when it is written by upsert); or, read by passthrough, the
// rows in the target's binary form only (raw).
type page struct {
	rows [][]any
	bulk []byte
	raw  *dialect.RawPage
	mark int64 // the stream's count for the table before the page was read (Copier.Stream)
}

// len is the page's rows.
func (p page) len() int {
	if p.raw != nil {
		return p.raw.Len()
	}
	return len(p.rows)
}

// head is the page's first n rows, and the key of the last of them; a
// page of decoded rows cut short loses its encoding (encoded again for
// its own batch).
func (p page) head(n int, keyIdx []int) (page, []any) {
	if p.raw != nil {
		h := p.raw.Head(n)
		return page{raw: &h, mark: p.mark}, h.Last()
	}
	h := page{rows: p.rows[:n], mark: p.mark}
	if n == len(p.rows) {
		h.bulk = p.bulk
	}
	return h, keyset.KeyOf(p.rows[n-1], keyIdx)
}

// tail is the page after its first n rows.
func (p page) tail(n int) page {
	if p.raw != nil {
		t := p.raw.Tail(n)
		return page{raw: &t, mark: p.mark}
	}
	return page{rows: p.rows[n:], mark: p.mark}
}

// pages reads the shard's pages after the key after, one page ahead of the
// writer, until the range ends, an error, or ctx ends. Each read is retried
// like a batch; the source's schema is checked every SchemaEvery, after a
// failed read and at the end of the range.
//
// While raw is on, pages are read by passthrough (rc, the source dialect's
// RawCopier) in the target's binary form with token; a table whose key
// the passthrough cannot decode turns it off.
func (c *Copier) pages(ctx context.Context, spec Spec, keyIdx []int, after []any, encode func([][]any) []byte, prof *Profile, raw *atomic.Bool, token int64) *keyset.Ahead[page] {
	rd := c.Reader(spec)
	rc, _ := c.SourceSQL.(dialect.RawCopier)
	checked := time.Now()
	return keyset.Prefetch(ctx, 1, func(ctx context.Context) (page, bool, error) {
		var pg page
		t0 := time.Now()
		err := c.retry(ctx, spec, "read", func() (err error) {
			var mark int64
			if c.Stream != nil {
				if mark, err = c.Stream.Applied(ctx, c.Target, spec.Shard.Table, false); err != nil {
					return fmt.Errorf("read the stream's count of %s: %w", spec.Shard.Table, err)
				}
				defer func() { pg.mark = mark }()
			}
			if c.SchemaCheck != nil && time.Since(checked) >= SchemaEvery {
				checked = time.Now()
				if err := c.SchemaCheck(ctx); err != nil {
					return permanent{fmt.Errorf("%w: %w", hold.ErrHalted, err)}
				}
			}
			if raw.Load() && rc != nil {
				rp, err := rd.RawPage(ctx, rc, after, token)
				if !errors.Is(err, dialect.ErrNotBulk) {
					if err != nil {
						err = fmt.Errorf("read %s after %v: %w", spec.Shard, after, err)
					}
					pg = page{raw: &rp}
					return c.checkSchema(ctx, rp.Len(), err)
				}
				c.decodeFromHere(spec, raw, err)
			}
			rows, err := c.readPage(ctx, rd, spec, after)
			pg = page{rows: rows}
			return c.checkSchema(ctx, len(rows), err)
		})
		if err != nil || pg.len() == 0 {
			return page{}, false, err
		}
		if pg.raw != nil {
			after = pg.raw.Last()
			prof.since(PhaseRead, t0)
			return pg, true, nil
		}
		after = keyset.KeyOf(pg.rows[len(pg.rows)-1], keyIdx)
		t0 = prof.since(PhaseRead, t0)
		pg.bulk = encode(pg.rows)
		prof.since(PhaseEncode, t0)
		return pg, true, nil
	})
}

// decodeFromHere turns passthrough off for the rest of the copy.
func (c *Copier) decodeFromHere(spec Spec, raw *atomic.Bool, why error) {
	if raw.Swap(false) && c.Log != nil {
		c.Log.Info("reading rows by decoding them from here", "shard", spec.Shard.String(), "why", why)
	}
}

// readPage reads one page; a value that cannot cross halts the shard,
// naming its row.
func (c *Copier) readPage(ctx context.Context, rd *keyset.Reader, spec Spec, after []any) ([][]any, error) {
	rows, err := rd.Page(ctx, after)
	var ce *keyset.ConvertError
	switch {
	case errors.As(err, &ce):
		return nil, permanent{fmt.Errorf("%w: %s: %w", hold.ErrHalted, spec.Shard, ce)}
	case err != nil:
		return nil, fmt.Errorf("read %s after %v: %w", spec.Shard, after, err)
	}
	return rows, nil
}

// checkSchema checks the source's schema after a read that failed for a
// reason other than the database's availability (a dropped column fails
// the read) and at the end of the range, once more before the shard is
// done; a change halts the shard.
func (c *Copier) checkSchema(ctx context.Context, rows int, err error) error {
	switch {
	case c.SchemaCheck == nil:
	case err != nil && dialect.Classify(err) == dialect.Other:
		if serr := c.SchemaCheck(ctx); serr != nil {
			return permanent{fmt.Errorf("%w: %w (%w)", hold.ErrHalted, serr, err)}
		}
	case err == nil && rows == 0:
		if serr := c.SchemaCheck(ctx); serr != nil {
			return permanent{fmt.Errorf("%w: %w", hold.ErrHalted, serr)}
		}
	}
	return err
}
