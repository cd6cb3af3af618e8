package verify

import (
	"context"
	"fmt"
)

// rows reads both sides' rows with lo < key <= hi (all rows when both are
// nil) in key order, as two streams, and merges them.
func (c *comparison) rows(ctx context.Context, lo, hi []any) error {
	// Cancelling the scans first makes an early return quick: closing a
	// result set otherwise reads it to the end.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	values := bounds(lo, hi, len(c.o.Key))
	a, err := c.open(ctx, c.src, c.form, lo != nil, hi != nil, values)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer a.close()
	defer cancel()
	b, err := c.open(ctx, c.dst, nil, lo != nil, hi != nil, values)
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
			if c.o.Report != nil && c.res.SourceRows%10000 == 0 {
				c.o.Report.Compared(c.res.SourceRows)
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

// sample tells the Reporter of a difference and keeps it as a sample
// while there is room.
func (c *comparison) sample(kind string, s, d *row, cols []string) {
	if c.o.Report != nil && c.collected == nil {
		from := s
		if from == nil {
			from = d
		}
		key := make([]any, len(c.keyIdx))
		for i, j := range c.keyIdx {
			key[i] = from.raw[j]
		}
		c.collected = c.o.Report.Differs(kind, key)
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
