package verify

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/typemap"
)

// Canonical value rules, the same whichever engine a value was read from
// (README, "Verification"):
//   - NULL is distinct from every value, including ''.
//   - integers and decimals compare as numbers: scale and trailing zeros do
//     not count (1.5 = 1.500), -0 = 0;
//   - floats compare by value, -0 = 0, NaN = NaN;
//   - booleans: true/false, MySQL tinyint(1) 1/0;
//   - timestamps: the instant in UTC to the microsecond; dates: the day;
//     times of day: to the microsecond;
//   - uuid: lower case;
//   - JSON: parsed, objects compared by key whatever the order, numbers as
//     written;
//   - char(n): trailing spaces do not count (MySQL strips them, PostgreSQL
//     pads); in every other string type every byte counts;
//   - bytes: every byte.
//
// A column's kind, which of these rules applies, is typemap.Pair of the
// source and target columns' base types.

// canon is a value in canonical form: a string for equality and display,
// and an ordered form for keys.
type canon struct {
	null  bool
	text  string
	isInt bool
	i     int64 // typemap.Number values that are int64
	isF   bool
	f     float64   // typemap.Float values
	num   *big.Rat  // other typemap.Number values
	at    time.Time // typemap.Timestamp, typemap.Date keys
}

func (c canon) String() string {
	switch {
	case c.null:
		return "NULL"
	case c.isInt && c.text == "":
		return strconv.FormatInt(c.i, 10)
	}
	return c.text
}

// equal reports whether two values read by either driver are the same under
// the canonical rules. Identical raw forms are equal without more work.
func equal(a, b any, k typemap.Kind) (bool, error) {
	if a == nil || b == nil {
		return a == nil && b == nil, nil
	}
	switch x := a.(type) {
	case []byte:
		if y, ok := b.([]byte); ok && bytes.Equal(x, y) {
			return true, nil
		}
		if y, ok := b.(string); ok && string(x) == y {
			return true, nil
		}
	case string:
		if y, ok := b.(string); ok && x == y {
			return true, nil
		}
		if y, ok := b.([]byte); ok && x == string(y) {
			return true, nil
		}
	case int64:
		if y, ok := b.(int64); ok && k != typemap.Bool {
			return x == y, nil
		}
	case float64:
		if y, ok := b.(float64); ok {
			return x == y || math.IsNaN(x) && math.IsNaN(y), nil
		}
	case time.Time:
		if y, ok := b.(time.Time); ok && k == typemap.Timestamp {
			return x.Truncate(time.Microsecond).Equal(y.Truncate(time.Microsecond)), nil
		}
	case bool:
		if y, ok := b.(bool); ok {
			return x == y, nil
		}
	}
	ca, err := canonical(a, k)
	if err != nil {
		return false, err
	}
	cb, err := canonical(b, k)
	if err != nil {
		return false, err
	}
	return ca.String() == cb.String(), nil
}

// canonical puts a value read by either driver into canonical form.
func canonical(v any, k typemap.Kind) (canon, error) {
	if v == nil {
		return canon{null: true}, nil
	}
	switch k {
	case typemap.Number:
		if i, ok := v.(int64); ok {
			return canon{isInt: true, i: i}, nil // text on demand (String)
		}
		s := text(v)
		if b, ok := v.(bool); ok {
			s = map[bool]string{true: "1", false: "0"}[b]
		}
		if s == "NaN" || strings.HasSuffix(s, "Infinity") {
			return canon{text: s}, nil
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return canon{}, fmt.Errorf("not a number: %q", s)
		}
		return canon{text: decimalText(s), num: r}, nil
	case typemap.Float:
		f, err := toFloat(v)
		if err != nil {
			return canon{}, err
		}
		if f == 0 {
			f = 0 // -0
		}
		if math.IsNaN(f) {
			return canon{text: "NaN", isF: true, f: f}, nil
		}
		return canon{text: strconv.FormatFloat(f, 'g', -1, 64), isF: true, f: f}, nil
	case typemap.Bool:
		s := text(v)
		switch x := v.(type) {
		case bool:
			return canon{text: strconv.FormatBool(x)}, nil
		case int64:
			s = strconv.FormatInt(x, 10)
		}
		switch s {
		case "1", "t", "true":
			return canon{text: "true"}, nil
		case "0", "f", "false":
			return canon{text: "false"}, nil
		}
		return canon{text: s}, nil // a tinyint(1) holding 2 is not true
	case typemap.Timestamp, typemap.Date:
		t, err := toTime(v)
		if err != nil {
			if s := text(v); strings.HasPrefix(s, "0000-") || strings.Contains(s, "-00") {
				return canon{text: s}, nil // a MySQL date with a zero part, compared as written
			}
			return canon{}, err
		}
		if k == typemap.Date {
			return canon{text: t.Format("2006-01-02"), at: t}, nil
		}
		t = t.UTC().Truncate(time.Microsecond)
		return canon{text: t.Format("2006-01-02 15:04:05.000000"), at: t}, nil
	case typemap.Time:
		s := timeOfDay(text(v))
		us, ok := micros(s)
		return canon{text: s, isInt: ok, i: us}, nil
	case typemap.UUID:
		return canon{text: strings.ToLower(text(v))}, nil
	case typemap.JSON:
		return canonJSON(v)
	case typemap.Char:
		return canon{text: strings.TrimRight(text(v), " ")}, nil
	case typemap.Bytes:
		if b, ok := v.([]byte); ok {
			return canon{text: "\\x" + hex.EncodeToString(b)}, nil
		}
	}
	return canon{text: text(v)}, nil
}

// decimalText writes a decimal without its sign when zero, leading zeros
// and trailing fractional zeros: "-0.500" and "00.5" are "0.5".
func decimalText(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	whole, frac, _ := strings.Cut(s, ".")
	whole = strings.TrimLeft(whole, "0")
	frac = strings.TrimRight(frac, "0")
	if whole == "" {
		whole = "0"
	}
	if frac != "" {
		whole += "." + frac
	}
	if neg && whole != "0" {
		whole = "-" + whole
	}
	return whole
}

func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int64:
		return float64(x), nil
	}
	return strconv.ParseFloat(text(v), 64)
}

// toTime reads a time.Time (pgx) or MySQL's text form, in UTC.
func toTime(v any) (time.Time, error) {
	if t, ok := v.(time.Time); ok {
		return t, nil
	}
	s := text(v)
	for _, layout := range []string{"2006-01-02 15:04:05.999999", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not a date or time: %q", s)
}

// micros reads [-]h:mm:ss.ffffff (MySQL TIME may be negative or past 24h)
// as signed microseconds, so time keys order as the databases order them.
func micros(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	parts := strings.Split(whole, ":")
	if len(parts) != 3 {
		return 0, false
	}
	var us int64
	for _, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return 0, false
		}
		us = us*60 + n
	}
	f, err := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	if err != nil {
		return 0, false
	}
	us = us*1_000_000 + f
	if neg {
		us = -us
	}
	return us, true
}

// timeOfDay writes hh:mm:ss with six fractional digits.
func timeOfDay(s string) string {
	whole, frac, _ := strings.Cut(s, ".")
	return whole + "." + (frac + "000000")[:6]
}

func canonJSON(v any) (canon, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(text(v))))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return canon{}, fmt.Errorf("not JSON: %w", err)
	}
	b, err := json.Marshal(jsonNumbers(doc)) // objects come out with sorted keys
	if err != nil {
		return canon{}, err
	}
	return canon{text: string(b)}, nil
}

// jsonNumbers writes every number of a JSON document by value (1e2, 100.0
// and 100 are one number; -0 is 0): jsonb and MySQL's JSON rewrite them.
func jsonNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = jsonNumbers(e)
		}
	case json.Number:
		f, _, err := big.ParseFloat(string(x), 10, 256, big.ToNearestEven)
		if err != nil {
			return x
		}
		if f.Sign() == 0 {
			return json.Number("0")
		}
		return json.Number(f.Text('g', -1))
	}
	return v
}

// compareFloat orders floats as PostgreSQL does: NaN after every number.
func compareFloat(a, b float64) int {
	switch an, bn := math.IsNaN(a), math.IsNaN(b); {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}

// rat is a number key as a rational.
func (c canon) rat() *big.Rat {
	if c.isInt {
		return new(big.Rat).SetInt64(c.i)
	}
	if c.num != nil {
		return c.num
	}
	return new(big.Rat)
}

// compareKeys orders two canonical keys the way the scans are ordered:
// numbers and times by value, everything else by bytes.
func compareKeys(a, b []canon) int {
	for i := range a {
		var c int
		switch {
		case a[i].isInt && b[i].isInt:
			c = cmp.Compare(a[i].i, b[i].i)
		case a[i].isF && b[i].isF:
			c = compareFloat(a[i].f, b[i].f)
		case a[i].isInt || a[i].num != nil:
			c = a[i].rat().Cmp(b[i].rat())
		case !a[i].at.IsZero() || !b[i].at.IsZero():
			c = a[i].at.Compare(b[i].at)
		default:
			c = strings.Compare(a[i].text, b[i].text)
		}
		if c != 0 {
			return c
		}
	}
	return 0
}
