// Package verify proves a copy right: it reads the source and the target
// table in the same key order, as two streams, and merges them, comparing
// every row by canonical value (canon.go), so that no engine difference —
// decimal scale, -0, time zones, boolean vs tinyint, JSON key order — shows
// as a difference and every real one does. Memory stays bounded by one row
// of each side plus the samples kept; the fence column is never read.
package verify

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/dialect"
)

// Scanner is what verify needs from a dialect: one statement reading cols
// ordered by key, text keys in byte order.
type Scanner interface {
	ScanOrdered(table []string, cols []dialect.Column, key []string, textKey []bool) string
}

// Side is one end of the comparison.
type Side struct {
	DB      *sql.DB
	SQL     Scanner
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
	Progress   func(int64) // rows read from the source so far, every 10000; may be nil
	// Collect, if set, receives every difference: its kind (missing,
	// extra, changed) and the key as read (from the source for missing and
	// changed rows, from the target for extra ones). An error stops the
	// comparison.
	Collect func(kind string, key []any) error
}

// Compare reads both sides and reports how they differ.
func Compare(ctx context.Context, src, dst Side, o Options) (Result, error) {
	res := Result{Table: o.Name, Samples: []Sample{}}
	if o.MaxSamples == 0 {
		o.MaxSamples = 10
	}
	if len(src.Columns) != len(dst.Columns) {
		return res, fmt.Errorf("verify %s: %d source columns, %d target columns", o.Name, len(src.Columns), len(dst.Columns))
	}
	names := make([]string, len(src.Columns))
	kinds := make([]kind, len(src.Columns))
	for i := range src.Columns {
		names[i] = src.Columns[i].Name
		kinds[i] = pair(src.Columns[i].Base, dst.Columns[i].Base)
	}
	keyIdx := make([]int, len(o.Key))
	for i, k := range o.Key {
		keyIdx[i] = slices.Index(names, k)
		if keyIdx[i] < 0 {
			return res, fmt.Errorf("verify %s: key column %q is not compared", o.Name, k)
		}
	}
	// Cancelling the scans first makes an early return quick: closing a
	// result set otherwise reads it to the end.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, err := open(ctx, src, names, o.Key, kinds, keyIdx)
	if err != nil {
		return res, fmt.Errorf("verify %s: source: %w", o.Name, err)
	}
	defer a.close()
	defer cancel()
	b, err := open(ctx, dst, names, o.Key, kinds, keyIdx)
	if err != nil {
		return res, fmt.Errorf("verify %s: target: %w", o.Name, err)
	}
	defer b.close()
	defer cancel()

	s, sok, err := a.next()
	if err != nil {
		return res, fmt.Errorf("verify %s: source: %w", o.Name, err)
	}
	d, dok, err := b.next()
	if err != nil {
		return res, fmt.Errorf("verify %s: target: %w", o.Name, err)
	}
	collected := error(nil)
	sample := func(kind string, s, d *row, cols []string) {
		if o.Collect != nil && collected == nil {
			from := s
			if from == nil {
				from = d
			}
			key := make([]any, len(keyIdx))
			for i, j := range keyIdx {
				key[i] = from.raw[j]
			}
			collected = o.Collect(kind, key)
		}
		if len(res.Samples) >= o.MaxSamples {
			return
		}
		sm := Sample{Kind: kind, Columns: cols}
		if s != nil {
			sm.Key, sm.Source = s.keyText(), s.values(names)
		}
		if d != nil {
			sm.Key, sm.Target = d.keyText(), d.values(names)
		}
		res.Samples = append(res.Samples, sm)
	}
	for sok || dok {
		if collected != nil {
			return res, collected
		}
		c := 0
		switch {
		case !dok:
			c = -1
		case !sok:
			c = 1
		default:
			c = compareKeys(s.key, d.key)
		}
		switch {
		case c < 0:
			res.Missing++
			sample("missing", &s, nil, nil)
		case c > 0:
			res.Extra++
			sample("extra", nil, &d, nil)
		default:
			cols, err := s.differs(d, names)
			if err != nil {
				return res, fmt.Errorf("verify %s: row %s: %w", o.Name, s.keyText(), err)
			}
			if len(cols) > 0 {
				res.Changed++
				sample("changed", &s, &d, cols)
			}
		}
		if c <= 0 {
			res.SourceRows++
			if o.Progress != nil && res.SourceRows%10000 == 0 {
				o.Progress(res.SourceRows)
			}
			if s, sok, err = a.next(); err != nil {
				return res, fmt.Errorf("verify %s: source: %w", o.Name, err)
			}
		}
		if c >= 0 {
			res.TargetRows++
			if d, dok, err = b.next(); err != nil {
				return res, fmt.Errorf("verify %s: target: %w", o.Name, err)
			}
		}
	}
	return res, nil
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

// stream is one side's ordered scan, read ahead by its own goroutine so
// that both sides are read at once.
type stream struct {
	rows   *sql.Rows
	kinds  []kind
	keyIdx []int
	raw    []any
	ptrs   []any
	ahead  chan chunk
	cur    chunk
	pos    int
	stop   chan struct{}
	done   chan struct{}
}

// chunk is a run of rows read ahead, or the error that ended the scan.
type chunk struct {
	rows []row
	err  error
}

// open starts one side's scan; its text key columns (by this side's own
// types) are ordered by bytes, like every other value compared in Go.
func open(ctx context.Context, s Side, names, key []string, kinds []kind, keyIdx []int) (*stream, error) {
	textKey := make([]bool, len(key))
	for i, j := range keyIdx {
		switch kinds[j] {
		case kNumber, kFloat, kBool, kTimestamp, kDate, kTime:
		default: // compared as text in Go: read in byte order of the text form
			textKey[i] = true
		}
	}
	rows, err := s.DB.QueryContext(ctx, s.SQL.ScanOrdered(s.Table, s.Columns, key, textKey))
	if err != nil {
		return nil, err
	}
	st := &stream{rows: rows, kinds: kinds, keyIdx: keyIdx, raw: make([]any, len(names)), ptrs: make([]any, len(names)),
		ahead: make(chan chunk, 4), stop: make(chan struct{}), done: make(chan struct{})}
	for i := range st.raw {
		st.ptrs[i] = &st.raw[i]
	}
	go st.readAhead()
	return st, nil
}

// readAhead sends the scan's rows in chunks of 256; an empty chunk ends it.
func (s *stream) readAhead() {
	defer close(s.done)
	for {
		var c chunk
		for len(c.rows) < 256 {
			r, ok, err := s.read()
			if err != nil {
				c.err = err
				break
			}
			if !ok {
				break
			}
			c.rows = append(c.rows, r)
		}
		select {
		case s.ahead <- c:
		case <-s.stop:
			return
		}
		if c.err != nil || len(c.rows) == 0 {
			return
		}
	}
}

// next returns the next row; ok is false at the end of the scan.
func (s *stream) next() (row, bool, error) {
	if s.pos == len(s.cur.rows) {
		s.cur, s.pos = <-s.ahead, 0
		if s.cur.err != nil {
			return row{}, false, s.cur.err
		}
		if len(s.cur.rows) == 0 {
			s.ahead <- s.cur // stay at the end
			return row{}, false, nil
		}
	}
	s.pos++
	return s.cur.rows[s.pos-1], true, nil
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
	close(s.stop)
	<-s.done
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
