package verify

import (
	"context"
	"database/sql"
	"slices"

	"github.com/migrate-dev/migrate/keyset"
	"github.com/migrate-dev/migrate/typemap"
)

// stream is one side's ordered scan, read ahead in runs of 256 rows by its
// own goroutine so that both sides are read at once.
type stream struct {
	rows   *sql.Rows
	form   []func(any) (any, error) // the source's (comparison.form); nil for the target
	kinds  []typemap.Kind
	keyIdx []int
	raw    []any
	ptrs   []any
	ahead  *keyset.Ahead[[]row]
	cur    []row
	pos    int
}

// open starts one side's scan of the rows within the bounds asked, their
// logical values given; form puts the values read in the compared form
// (the source's, comparison.form).
func (c *comparison) open(ctx context.Context, s Side, form []func(any) (any, error), lo, hi bool, values []any) (*stream, error) {
	q := s.SQL.ScanOrdered(s.Table, s.Columns, c.o.Key, c.textKey, lo, hi)
	rows, err := s.DB.QueryContext(ctx, q.SQL, q.Bind(values)...)
	if err != nil {
		return nil, err
	}
	st := &stream{rows: rows, form: form, kinds: c.kinds, keyIdx: c.keyIdx, raw: make([]any, len(c.names)), ptrs: make([]any, len(c.names))}
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
	if err := toForm(s.form, r.raw); err != nil {
		return row{}, false, err
	}
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
