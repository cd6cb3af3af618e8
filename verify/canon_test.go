package verify

import (
	"math"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/typemap"
)

// The canonical rules: values that mean the same on PostgreSQL and MySQL
// are equal, and values that differ stay different.
func TestCanonical(t *testing.T) {
	at := time.Date(2024, 2, 29, 23, 59, 59, 999999000, time.UTC)
	same := []struct {
		name string
		k    typemap.Kind
		a, b any
	}{
		{"decimal scale", typemap.Number, "1.500", []byte("1.5")},
		{"negative zero decimal", typemap.Number, "-0.000", "0"},
		{"integer types", typemap.Number, int64(42), []byte("42")},
		{"unsigned bigint", typemap.Number, "18446744073709551615", []byte("18446744073709551615")},
		{"negative zero float", typemap.Float, math.Copysign(0, -1), 0.0},
		{"float32 widened", typemap.Float, float32(1.5), 1.5},
		{"boolean vs tinyint(1)", typemap.Bool, true, int64(1)},
		{"timestamp zone", typemap.Timestamp, at.In(time.FixedZone("x", 3600)), []byte("2024-02-29 23:59:59.999999")},
		{"date", typemap.Date, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), []byte("2024-02-29")},
		{"time fraction", typemap.Time, "13:14:15.5", []byte("13:14:15.500000")},
		{"uuid case", typemap.UUID, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{"json key order and spacing", typemap.JSON, []byte(`{"b": [1, 2], "a": {"y": 1, "x": 2}}`), `{"a":{"x":2,"y":1},"b":[1,2]}`},
		{"char padding", typemap.Char, "ab   ", []byte("ab")},
		{"json numbers by value", typemap.JSON, `{"n": 1e2, "z": -0, "x": 1.0E+1, "f": 1.50}`, `{"n": 100, "z": 0, "x": 10, "f": 1.5}`},
		{"bytes", typemap.Bytes, []byte{0, 255}, []byte{0, 255}},
	}
	for _, c := range same {
		t.Run("same/"+c.name, func(t *testing.T) {
			a, err1 := canonical(c.a, c.k)
			b, err2 := canonical(c.b, c.k)
			if err1 != nil || err2 != nil || a.String() != b.String() || a.null != b.null {
				t.Errorf("%v vs %v: %q vs %q (%v, %v), want equal", c.a, c.b, a, b, err1, err2)
			}
		})
	}
	different := []struct {
		name string
		k    typemap.Kind
		a, b any
	}{
		{"NULL vs empty string", typemap.Text, nil, ""},
		{"trailing space in text", typemap.Text, "a", "a "},
		{"case in text", typemap.Text, "a", "A"},
		{"one microsecond", typemap.Timestamp, at, at.Add(time.Microsecond)},
		{"decimal value", typemap.Number, "1.5", "1.51"},
		{"tinyint(1) holding 2 is not true", typemap.Bool, true, int64(2)},
		{"numeric NaN vs Infinity", typemap.Number, "NaN", "Infinity"},
		{"json value", typemap.JSON, `{"a": 1}`, `{"a": 2}`},
		{"bytes", typemap.Bytes, []byte{0}, []byte{1}},
		{"float", typemap.Float, 0.1, 0.1000000001},
	}
	for _, c := range different {
		t.Run("different/"+c.name, func(t *testing.T) {
			a, _ := canonical(c.a, c.k)
			b, _ := canonical(c.b, c.k)
			if a.String() == b.String() && a.null == b.null {
				t.Errorf("%v vs %v both %q, want different", c.a, c.b, a)
			}
		})
	}
}

func TestCompareKeys(t *testing.T) {
	num := func(s string) canon { c, _ := canonical(s, typemap.Number); return c }
	str := func(s string) canon { c, _ := canonical(s, typemap.Text); return c }
	flt := func(f float64) canon { c, _ := canonical(f, typemap.Float); return c }
	tod := func(s string) canon { c, _ := canonical(s, typemap.Time); return c }
	for _, c := range []struct {
		a, b []canon
		want int
	}{
		{[]canon{num("9")}, []canon{num("10")}, -1}, // by value, not text
		{[]canon{num("-1")}, []canon{num("-2")}, 1},
		{[]canon{str("B")}, []canon{str("a")}, -1}, // by bytes
		{[]canon{num("1"), str("b")}, []canon{num("1"), str("a")}, 1},
		{[]canon{num("1.50")}, []canon{num("1.5")}, 0},
		{[]canon{flt(9.5)}, []canon{flt(10.5)}, -1},                // floats by value
		{[]canon{tod("-02:00:00")}, []canon{tod("-01:00:00")}, -1}, // MySQL TIME by value
		{[]canon{tod("100:00:00")}, []canon{tod("23:00:00")}, 1},
	} {
		if got := compareKeys(c.a, c.b); got != c.want {
			t.Errorf("compareKeys(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
