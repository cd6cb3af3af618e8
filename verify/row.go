package verify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// row is one row as read, with its key in canonical form; values are put in
// canonical form only when their raw forms differ.
type row struct {
	raw   []any
	kinds []typemap.Kind
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

// toForm puts each value of raw in the compared form, in place (form[i]
// nil: as it is).
func toForm(form []func(any) (any, error), raw []any) error {
	for i, f := range form {
		if f == nil {
			continue
		}
		v, err := f(raw[i])
		if err != nil {
			return err
		}
		raw[i] = v
	}
	return nil
}

// Rows compares a set of source rows with the target rows of the same keys
// (both as read, columns in the same order; the source of engine from, the
// target of engine to) and returns how many source rows are missing in the
// target and how many differ: the check of a takeover's resume
// neighbourhood.
func Rows(from, to plans.Engine, src, dst []dialect.Column, key []string, a, b [][]any) (missing, changed int64, err error) {
	form := typemap.SourceForm(from, to, src, dst)
	kinds := make([]typemap.Kind, len(src))
	names := make([]string, len(src))
	for i := range src {
		kinds[i], names[i] = typemap.Pair(src[i].Base, dst[i].Base), src[i].Name
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
		raw = slices.Clone(raw)
		if err := toForm(form, raw); err != nil {
			return 0, 0, err
		}
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
