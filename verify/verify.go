// Package verify proves a copy right: it reads the source and the target
// table in the same key order, as two streams, and merges them, comparing
// every row by canonical value (canon.go), so that no engine difference —
// decimal scale, -0, time zones, boolean vs tinyint, JSON key order — shows
// as a difference and every real one does. When both sides are on one
// engine it first compares key-range chunks by count and MD5 in each
// database and reads only the chunks that differ. Memory stays bounded by
// one row of each side plus the samples kept; the fence column is never
// read.
package verify

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/keyset"
)

// Side is one end of the comparison.
type Side struct {
	DB      *sql.DB
	SQL     dialect.Dialect
	Table   []string
	Columns []dialect.Column // the compared columns, in the same order on both sides
}

// Result is one table's comparison. Its JSON keys are the contract of SPEC §4.
type Result struct {
	Table      string   `json:"table"`
	SourceRows int64    `json:"source_rows"`
	TargetRows int64    `json:"target_rows"`
	Missing    int64    `json:"missing"`
	Extra      int64    `json:"extra"`
	Changed    int64    `json:"changed"`
	Samples    []Sample `json:"samples"`
	// Method is "checksum" when key-range chunks were hashed in each
	// database and only differing chunks compared row by row, "rows" when
	// every row was compared.
	Method   string `json:"method"`
	Chunks   int64  `json:"chunks,omitempty"`
	Narrowed int64  `json:"chunks_narrowed,omitempty"` // chunks whose checksums differed
}

// Equal reports whether the table was found identical.
func (r Result) Equal() bool { return r.Missing == 0 && r.Extra == 0 && r.Changed == 0 }

// Sample is one differing row, values in canonical form.
type Sample struct {
	Key     string         `json:"key"`
	Kind    string         `json:"kind"`   // missing, extra, changed
	Source  map[string]any `json:"source"` // canonical text, nil for NULL
	Target  map[string]any `json:"target"`
	Columns []string       `json:"columns,omitempty"` // the differing columns of a changed row
}

// Options tune a comparison.
type Options struct {
	Name       string      // the table's name in the result
	Key        []string    // business key columns
	MaxSamples int         // differing rows kept per table; default 10
	Progress   func(int64) // rows read from the source so far, from time to time; may be nil
	// Collect, if set, receives every difference: its kind (missing,
	// extra, changed) and the key as read (from the source for missing and
	// changed rows, from the target for extra ones). An error stops the
	// comparison.
	Collect func(kind string, key []any) error
	// ChunkRows is the size of a checksum chunk, in source rows; default
	// 10000, negative to compare every row.
	ChunkRows int
}

// Compare reports how the two sides differ. When both are on one engine,
// with the same column types and a key that orders by value, each key range
// of ChunkRows source rows is counted and hashed in its own database, both
// sides at once, and only the ranges whose count or 128-bit hash differ are
// read and compared row by row. Otherwise both tables are read in full. A
// difference is only ever reported from the row comparison, so the hash can
// make verification faster, never wrong in the way of a false positive.
func Compare(ctx context.Context, src, dst Side, o Options) (Result, error) {
	c := &comparison{src: src, dst: dst, o: o, res: Result{Table: o.Name, Samples: []Sample{}, Method: "rows"}}
	if c.o.MaxSamples == 0 {
		c.o.MaxSamples = 10
	}
	if c.o.ChunkRows == 0 {
		c.o.ChunkRows = 10000
	}
	if len(src.Columns) != len(dst.Columns) {
		return c.res, fmt.Errorf("verify %s: %d source columns, %d target columns", o.Name, len(src.Columns), len(dst.Columns))
	}
	c.names = make([]string, len(src.Columns))
	c.kinds = make([]kind, len(src.Columns))
	for i := range src.Columns {
		c.names[i] = src.Columns[i].Name
		c.kinds[i] = pair(src.Columns[i].Base, dst.Columns[i].Base)
	}
	c.keyIdx = make([]int, len(o.Key))
	c.textKey = make([]bool, len(o.Key))
	for i, k := range o.Key {
		c.keyIdx[i] = slices.Index(c.names, k)
		if c.keyIdx[i] < 0 {
			return c.res, fmt.Errorf("verify %s: key column %q is not compared", o.Name, k)
		}
		switch c.kinds[c.keyIdx[i]] {
		case kNumber, kFloat, kBool, kTimestamp, kDate, kTime:
		default: // compared as text in Go: read in byte order of the text form
			c.textKey[i] = true
		}
	}
	var err error
	if c.checksummed() {
		c.res.Method = "checksum"
		err = c.chunks(ctx)
	} else {
		err = c.rows(ctx, nil, nil)
	}
	if err == nil {
		err = c.collected
	}
	if err != nil {
		return c.res, fmt.Errorf("verify %s: %w", o.Name, err)
	}
	return c.res, nil
}

// comparison is one table's comparison under way.
type comparison struct {
	src, dst  Side
	o         Options
	res       Result
	names     []string
	kinds     []kind
	keyIdx    []int
	textKey   []bool
	collected error // the first error of o.Collect
}

// checksummed reports whether chunk checksums can stand for the rows: one
// engine, the same types on both sides (equal values then have equal text),
// and a key ordered by value on both (a key range holds the same rows).
func (c *comparison) checksummed() bool {
	if c.o.ChunkRows < 0 || c.src.SQL.Engine() != c.dst.SQL.Engine() {
		return false
	}
	for i := range c.src.Columns {
		if !strings.EqualFold(c.src.Columns[i].Type, c.dst.Columns[i].Type) {
			return false
		}
	}
	for _, j := range c.keyIdx {
		if !c.src.SQL.OrderedByValue(c.src.Columns[j]) || !c.dst.SQL.OrderedByValue(c.dst.Columns[j]) {
			return false
		}
	}
	return true
}

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
		if c.o.Progress != nil {
			c.o.Progress(c.res.SourceRows)
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

// rows reads both sides' rows with lo < key <= hi (all rows when both are
// nil) in key order, as two streams, and merges them.
func (c *comparison) rows(ctx context.Context, lo, hi []any) error {
	// Cancelling the scans first makes an early return quick: closing a
	// result set otherwise reads it to the end.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	values := bounds(lo, hi, len(c.o.Key))
	a, err := c.open(ctx, c.src, lo != nil, hi != nil, values)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer a.close()
	defer cancel()
	b, err := c.open(ctx, c.dst, lo != nil, hi != nil, values)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer b.close()
	defer cancel()

	s, sok, err := a.next()
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	d, dok, err := b.next()
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	for (sok || dok) && c.collected == nil {
		k := 0
		switch {
		case !dok:
			k = -1
		case !sok:
			k = 1
		default:
			k = compareKeys(s.key, d.key)
		}
		switch {
		case k < 0:
			c.res.Missing++
			c.sample("missing", &s, nil, nil)
		case k > 0:
			c.res.Extra++
			c.sample("extra", nil, &d, nil)
		default:
			cols, err := s.differs(d, c.names)
			if err != nil {
				return fmt.Errorf("row %s: %w", s.keyText(), err)
			}
			if len(cols) > 0 {
				c.res.Changed++
				c.sample("changed", &s, &d, cols)
			}
		}
		if k <= 0 {
			c.res.SourceRows++
			if c.o.Progress != nil && c.res.SourceRows%10000 == 0 {
				c.o.Progress(c.res.SourceRows)
			}
			if s, sok, err = a.next(); err != nil {
				return fmt.Errorf("source: %w", err)
			}
		}
		if k >= 0 {
			c.res.TargetRows++
			if d, dok, err = b.next(); err != nil {
				return fmt.Errorf("target: %w", err)
			}
		}
	}
	return nil
}

// sample hands a difference to Collect and keeps it as a sample while
// there is room.
func (c *comparison) sample(kind string, s, d *row, cols []string) {
	if c.o.Collect != nil && c.collected == nil {
		from := s
		if from == nil {
			from = d
		}
		key := make([]any, len(c.keyIdx))
		for i, j := range c.keyIdx {
			key[i] = from.raw[j]
		}
		c.collected = c.o.Collect(kind, key)
	}
	if len(c.res.Samples) >= c.o.MaxSamples {
		return
	}
	sm := Sample{Kind: kind, Columns: cols}
	if s != nil {
		sm.Key, sm.Source = s.keyText(), s.values(c.names)
	}
	if d != nil {
		sm.Key, sm.Target = d.keyText(), d.values(c.names)
	}
	c.res.Samples = append(c.res.Samples, sm)
}

// row is one row as read, with its key in canonical form; values are put in
// canonical form only when their raw forms differ.
type row struct {
	raw   []any
	kinds []kind
	key   []canon
}

func (r row) keyText() string {
	parts := make([]string, len(r.key))
	for i, k := range r.key {
		parts[i] = k.String()
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func (r row) values(names []string) map[string]any {
	m := make(map[string]any, len(names))
	for i, n := range names {
		c, err := canonical(r.raw[i], r.kinds[i])
		switch {
		case err != nil:
			m[n] = fmt.Sprintf("%v (%v)", r.raw[i], err)
		case c.null:
			m[n] = nil
		default:
			m[n] = c.String()
		}
	}
	return m
}

func (r row) differs(o row, names []string) ([]string, error) {
	var cols []string
	for i := range r.raw {
		eq, err := equal(r.raw[i], o.raw[i], r.kinds[i])
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", names[i], err)
		}
		if !eq {
			cols = append(cols, names[i])
		}
	}
	return cols, nil
}

// stream is one side's ordered scan, read ahead in runs of 256 rows by its
// own goroutine so that both sides are read at once.
type stream struct {
	rows   *sql.Rows
	kinds  []kind
	keyIdx []int
	raw    []any
	ptrs   []any
	ahead  *keyset.Ahead[[]row]
	cur    []row
	pos    int
}

// open starts one side's scan of the rows within the bounds asked, their
// logical values given.
func (c *comparison) open(ctx context.Context, s Side, lo, hi bool, values []any) (*stream, error) {
	q := s.SQL.ScanOrdered(s.Table, s.Columns, c.o.Key, c.textKey, lo, hi)
	rows, err := s.DB.QueryContext(ctx, q.SQL, q.Bind(values)...)
	if err != nil {
		return nil, err
	}
	st := &stream{rows: rows, kinds: c.kinds, keyIdx: c.keyIdx, raw: make([]any, len(c.names)), ptrs: make([]any, len(c.names))}
	for i := range st.raw {
		st.ptrs[i] = &st.raw[i]
	}
	st.ahead = keyset.Prefetch(ctx, 4, func(context.Context) ([]row, bool, error) {
		var run []row
		for len(run) < 256 {
			r, ok, err := st.read()
			if err != nil {
				return nil, false, err
			}
			if !ok {
				break
			}
			run = append(run, r)
		}
		return run, len(run) > 0, nil
	})
	return st, nil
}

// next returns the next row; ok is false at the end of the scan.
func (s *stream) next() (row, bool, error) {
	if s.pos == len(s.cur) {
		run, ok, err := s.ahead.Next(context.Background()) // the scan's own context ends it
		if !ok {
			return row{}, false, err
		}
		s.cur, s.pos = run, 0
	}
	s.pos++
	return s.cur[s.pos-1], true, nil
}

func (s *stream) read() (row, bool, error) {
	if !s.rows.Next() {
		return row{}, false, s.rows.Err()
	}
	if err := s.rows.Scan(s.ptrs...); err != nil {
		return row{}, false, err
	}
	r := row{raw: slices.Clone(s.raw), kinds: s.kinds, key: make([]canon, len(s.keyIdx))}
	for i, j := range s.keyIdx {
		c, err := canonical(s.raw[j], s.kinds[j])
		if err != nil {
			return row{}, false, err
		}
		r.key[i] = c
	}
	return r, true, nil
}

func (s *stream) close() {
	s.ahead.Close()
	_ = s.rows.Close()
}

// Rows compares a set of source rows with the target rows of the same keys
// (both as read, columns in the same order) and returns how many source
// rows are missing in the target and how many differ: the check of a
// takeover's resume neighbourhood.
func Rows(src, dst []dialect.Column, key []string, a, b [][]any) (missing, changed int64, err error) {
	kinds := make([]kind, len(src))
	names := make([]string, len(src))
	for i := range src {
		kinds[i], names[i] = pair(src[i].Base, dst[i].Base), src[i].Name
	}
	keyIdx := make([]int, len(key))
	for i, k := range key {
		if keyIdx[i] = slices.Index(names, k); keyIdx[i] < 0 {
			return 0, 0, fmt.Errorf("key column %q is not compared", k)
		}
	}
	keyOf := func(raw []any) (string, error) {
		parts := make([]string, len(keyIdx))
		for i, j := range keyIdx {
			c, err := canonical(raw[j], kinds[j])
			if err != nil {
				return "", err
			}
			parts[i] = c.String()
		}
		return strings.Join(parts, "\x00"), nil
	}
	byKey := make(map[string][]any, len(b))
	for _, raw := range b {
		k, err := keyOf(raw)
		if err != nil {
			return 0, 0, err
		}
		byKey[k] = raw
	}
	for _, raw := range a {
		k, err := keyOf(raw)
		if err != nil {
			return 0, 0, err
		}
		other, ok := byKey[k]
		if !ok {
			missing++
			continue
		}
		cols, err := row{raw: raw, kinds: kinds}.differs(row{raw: other, kinds: kinds}, names)
		if err != nil {
			return 0, 0, err
		}
		if len(cols) > 0 {
			changed++
		}
	}
	return missing, changed, nil
}
