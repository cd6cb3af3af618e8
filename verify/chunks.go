package verify

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// span is a key range lo < key <= hi, a nil bound open; with the count and
// checksum of one side's rows in it.
type span struct {
	lo, hi []any
	rows   int64
	sum    sql.NullString // NULL: not computed, compare the rows
	err    error
}

// chunks hashes the source's key ranges of ChunkRows rows and the target's
// same ranges, each side in its own goroutine and database while a third
// finds the ranges' ends, and compares the rows of the ranges whose counts
// or hashes differ. A range whose hash cannot be computed (a database's
// limit on one value's size) is compared row by row too.
func (c *comparison) chunks(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	send := func(ch chan<- span, s span) bool {
		select {
		case ch <- s:
			return true
		case <-ctx.Done():
			return false
		}
	}
	ranges := [2]chan span{make(chan span, 8), make(chan span, 8)} // for the source, for the target
	wg.Go(func() {
		defer close(ranges[0])
		defer close(ranges[1])
		var lo []any
		for {
			s := span{lo: lo}
			s.hi, s.err = c.chunkEnd(ctx, lo)
			if !send(ranges[0], s) || s.err != nil || !send(ranges[1], s) || s.hi == nil {
				return
			}
			lo = s.hi
		}
	})
	var sums [2]chan span
	for i, side := range []Side{c.src, c.dst} {
		sums[i] = make(chan span, 8)
		wg.Go(func() {
			defer close(sums[i])
			for s := range ranges[i] {
				if s.err == nil {
					s.rows, s.sum, s.err = c.checksum(ctx, side, s)
					if s.err != nil && ctx.Err() == nil {
						s.sum, s.err = sql.NullString{}, nil
					}
				}
				if !send(sums[i], s) || s.err != nil {
					return
				}
			}
		})
	}
	for a := range sums[0] {
		if a.err != nil {
			return fmt.Errorf("source: %w", a.err)
		}
		b, ok := <-sums[1]
		switch {
		case !ok:
			return fmt.Errorf("target: checksums ended early: %w", ctx.Err())
		case b.err != nil:
			return fmt.Errorf("target: %w", b.err)
		}
		c.res.Chunks++
		if a.rows == b.rows && a.sum.Valid && b.sum.Valid && a.sum.String == b.sum.String {
			c.res.SourceRows += a.rows
			c.res.TargetRows += b.rows
		} else {
			c.res.Narrowed++
			if err := c.rows(ctx, a.lo, a.hi); err != nil {
				return err
			}
		}
		if c.o.Report != nil {
			c.o.Report.Compared(c.res.SourceRows)
		}
	}
	return nil
}

// chunkEnd returns the key ChunkRows source rows after lo, nil when fewer
// remain.
func (c *comparison) chunkEnd(ctx context.Context, lo []any) ([]any, error) {
	q := c.src.SQL.ChunkEnd(c.src.Table, c.o.Key, lo != nil, c.o.ChunkRows)
	key := make([]any, len(c.o.Key))
	ptrs := make([]any, len(key))
	for i := range key {
		ptrs[i] = &key[i]
	}
	err := c.src.DB.QueryRowContext(ctx, q.SQL, q.Bind(lo)...).Scan(ptrs...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return key, err
}

// checksum counts and hashes one side's rows of the span s.
func (c *comparison) checksum(ctx context.Context, side Side, s span) (rows int64, sum sql.NullString, err error) {
	q := side.SQL.Checksum(side.Table, side.Columns, c.o.Key, s.lo != nil, s.hi != nil)
	err = side.DB.QueryRowContext(ctx, q.SQL, q.Bind(bounds(s.lo, s.hi, len(c.o.Key)))...).Scan(&rows, &sum)
	return rows, sum, err
}

// bounds lays out the logical values of a key range: lo's parts, then hi's.
func bounds(lo, hi []any, n int) []any {
	v := make([]any, 2*n)
	copy(v, lo)
	copy(v[n:], hi)
	return v
}
