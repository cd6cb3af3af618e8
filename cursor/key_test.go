package cursor

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestEncodeKey(t *testing.T) {
	ts := time.Date(2024, 2, 29, 1, 2, 3, 123456000, time.FixedZone("x", 7200))
	cases := []struct {
		in   []any
		json string
		back []any
	}{
		{[]any{int64(9223372036854775807)}, `[9223372036854775807]`, []any{"9223372036854775807"}},
		{[]any{int64(-1), "Ab é😀"}, `[-1,"Ab é😀"]`, []any{"-1", "Ab é😀"}},
		{[]any{ts}, `["2024-02-28T23:02:03.123456Z"]`, []any{"2024-02-28T23:02:03.123456Z"}},
		{[]any{[]byte{0, 255}}, `[{"hex":"00ff"}]`, []any{[]byte{0, 255}}},
		{[]any{"12.500"}, `["12.500"]`, []any{"12.500"}},
	}
	for _, c := range cases {
		got, err := EncodeKey(c.in)
		if err != nil || got != c.json {
			t.Errorf("EncodeKey(%v) = %s, %v; want %s", c.in, got, err, c.json)
			continue
		}
		back, err := DecodeKey(got)
		if err != nil || !reflect.DeepEqual(back, c.back) {
			t.Errorf("DecodeKey(%s) = %#v, %v; want %#v", got, back, err, c.back)
		}
	}
	if _, err := EncodeKey([]any{nil}); err == nil {
		t.Error("a NULL key part must be refused")
	}
	if _, err := EncodeKey([]any{struct{}{}}); err == nil {
		t.Error("an unknown key type must be refused")
	}
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(`[1,"a",{"hex":"00"}]`)
	f.Add(`[]`)
	f.Add(`[{"text_b64":"YeliAA=="},"NaN","-Infinity"]`)
	f.Fuzz(func(t *testing.T, s string) {
		k, err := DecodeKey(s)
		if err != nil {
			return
		}
		// A decoded key encodes again and decodes to the same values.
		enc, err := EncodeKey(k)
		if err != nil {
			if len(k) > 0 {
				return // e.g. a JSON null part
			}
			t.Fatalf("EncodeKey(%v): %v", k, err)
		}
		again, err := DecodeKey(enc)
		if err != nil || !reflect.DeepEqual(again, k) {
			t.Fatalf("round trip of %q: %#v vs %#v (%v)", s, again, k, err)
		}
	})
}

// notUTF8 are strings a driver may hand over for text (a SQL_ASCII
// PostgreSQL database) that are not valid UTF-8.
var notUTF8 = []string{"\xff", "a\xe9b", "a\x80", "\xc3\x28", "\xed\xa0\x80", "ok\xf4\x90\x80\x80", "\xef\xbf", "a\xef\xbf\xbd\xff"}

func TestEncodeKey_NotUTF8(t *testing.T) {
	for _, s := range notUTF8 {
		key := []any{int64(7), s, []byte(s)}
		enc, err := EncodeKey(key)
		if err != nil {
			t.Fatalf("EncodeKey(%q): %v", s, err)
		}
		if !utf8.ValidString(enc) || !json.Valid([]byte(enc)) || strings.ContainsRune(enc, utf8.RuneError) {
			t.Errorf("EncodeKey(%q) = %q, want valid JSON without U+FFFD", s, enc)
		}
		want := `[7,{"text_b64":"` + base64.StdEncoding.EncodeToString([]byte(s)) + `"},{"hex":"` + hex.EncodeToString([]byte(s)) + `"}]`
		if enc != want {
			t.Errorf("EncodeKey(%q) = %s, want %s", s, enc, want)
		}
		back, err := DecodeKey(enc)
		if err != nil {
			t.Fatalf("DecodeKey(%s): %v", enc, err)
		}
		// The text part is a string of the very same bytes (bound as text,
		// as the driver handed it over), the bytes part stays []byte.
		if got, ok := back[1].(string); !ok || got != s {
			t.Errorf("DecodeKey(%s)[1] = %#v, want the string %q", enc, back[1], s)
		}
		if !reflect.DeepEqual(back, []any{"7", s, []byte(s)}) {
			t.Errorf("DecodeKey(%s) = %#v", enc, back)
		}
	}
	// Valid UTF-8, U+FFFD itself included, is a JSON string as ever.
	for _, s := range []string{"", "a\ufffdb", "é", "\u2028<&>"} {
		enc, err := EncodeKey([]any{s})
		if err != nil || strings.Contains(enc, "text_b64") {
			t.Errorf("EncodeKey(%q) = %s, %v; want a JSON string", s, enc, err)
		}
		if back, err := DecodeKey(enc); err != nil || back[0] != s {
			t.Errorf("DecodeKey(%s) = %#v, %v; want %q", enc, back, err, s)
		}
	}
}

func TestEncodeKey_NonFiniteFloats(t *testing.T) {
	cases := []struct {
		in   any
		json string
	}{
		{math.NaN(), `["NaN"]`},
		{math.Inf(1), `["Infinity"]`},
		{math.Inf(-1), `["-Infinity"]`},
		{float32(math.NaN()), `["NaN"]`},
		{float32(math.Inf(1)), `["Infinity"]`},
		{float32(math.Inf(-1)), `["-Infinity"]`},
		// Finite floats are the shortest decimal that reads back exactly.
		{math.Copysign(0, -1), `[-0]`},
		{5e-324, `[5e-324]`},
		{math.MaxFloat64, `[1.7976931348623157e+308]`},
		{1e21, `[1e+21]`},
		{float32(0.1), `[0.1]`},
		{float64(float32(0.1)), `[0.10000000149011612]`}, // a real as pgx hands it over
	}
	for _, c := range cases {
		enc, err := EncodeKey([]any{c.in})
		if err != nil || enc != c.json {
			t.Errorf("EncodeKey(%v) = %s, %v; want %s", c.in, enc, err, c.json)
			continue
		}
		back, err := DecodeKey(enc)
		if err != nil || len(back) != 1 {
			t.Fatalf("DecodeKey(%s) = %#v, %v", enc, back, err)
		}
		s, ok := back[0].(string)
		if !ok {
			t.Fatalf("DecodeKey(%s) = %#v, want a string", enc, back)
		}
		bits := 64
		want := reflect.ValueOf(c.in).Float()
		if _, ok := c.in.(float32); ok {
			bits = 32
		}
		got, err := strconv.ParseFloat(s, bits)
		if err != nil || !(got == want && math.Signbit(got) == math.Signbit(want) || math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("%s decodes to %q, which reads as %v (%v), want %v", enc, s, got, err, want)
		}
	}
}

// Bounds are keys of one part: a shard bound at such a value is stored too.
func TestBound_RoundTrip(t *testing.T) {
	for _, c := range []struct{ v, want any }{{"a\xe9b", "a\xe9b"}, {math.Inf(1), "Infinity"}, {math.NaN(), "NaN"}, {int64(5), "5"}} {
		v := c.v
		ns, err := encodeBound(v)
		if err != nil || !ns.Valid {
			t.Fatalf("encodeBound(%#v) = %v, %v", v, ns, err)
		}
		back, err := decodeBound(ns)
		if err != nil {
			t.Fatalf("decodeBound(%s): %v", ns.String, err)
		}
		if back != c.want {
			t.Errorf("bound %#v stored as %s decodes to %#v, want %#v", v, ns.String, back, c.want)
		}
	}
}

func TestDecodeKey_BadObjects(t *testing.T) {
	for _, s := range []string{`[{}]`, `[{"hex":"00","text_b64":"AA=="}]`, `[{"hex":1}]`, `[{"hex":"0"}]`,
		`[{"text_b64":"!!"}]`, `[{"text_b64":null}]`, `[{"b64":"AA=="}]`} {
		if k, err := DecodeKey(s); err == nil {
			t.Errorf("DecodeKey(%s) = %#v, want an error", s, k)
		}
	}
}

// v0EncodeKey and v0DecodeKey are the format as it was before "text_b64"
// and the NaN/infinity strings, frozen: what checkpoints stored before
// then hold.
func v0EncodeKey(key []any) (string, error) {
	out := make([]any, len(key))
	for i, v := range key {
		switch v := v.(type) {
		case nil:
			return "", fmt.Errorf("key part %d is NULL", i+1)
		case int64:
			out[i] = json.Number(strconv.FormatInt(v, 10))
		case int32:
			out[i] = json.Number(strconv.FormatInt(int64(v), 10))
		case int:
			out[i] = json.Number(strconv.Itoa(v))
		case uint64:
			out[i] = json.Number(strconv.FormatUint(v, 10))
		case float64:
			out[i] = json.Number(strconv.FormatFloat(v, 'g', -1, 64))
		case string, bool:
			out[i] = v
		case time.Time:
			out[i] = v.UTC().Format(time.RFC3339Nano)
		case []byte:
			out[i] = map[string]string{"hex": hex.EncodeToString(v)}
		default:
			return "", fmt.Errorf("key part %d has unsupported type %T", i+1, v)
		}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func v0DecodeKey(s string) ([]any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var raw []any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("bad key %q: %w", s, err)
	}
	out := make([]any, len(raw))
	for i, v := range raw {
		switch v := v.(type) {
		case json.Number:
			out[i] = v.String()
		case string, bool:
			out[i] = v
		case map[string]any:
			h, _ := v["hex"].(string)
			b, err := hex.DecodeString(h)
			if err != nil {
				return nil, fmt.Errorf("bad key %q: %w", s, err)
			}
			out[i] = b
		default:
			return nil, fmt.Errorf("bad key %q: part %d", s, i+1)
		}
	}
	return out, nil
}

// TestDecodeKey_OldFormat: every key the earlier format could store is
// written the same way now and decodes as it did, so stored checkpoints
// need no rewrite; one it stored with U+FFFD for bytes that were not UTF-8
// decodes as stored.
func TestDecodeKey_OldFormat(t *testing.T) {
	ts := time.Date(2024, 2, 29, 1, 2, 3, 123456789, time.FixedZone("x", -3600))
	keys := [][]any{
		{int64(math.MinInt64)}, {int32(-5), 7}, {uint64(math.MaxUint64)},
		{1.5}, {math.Copysign(0, -1)}, {5e-324}, {math.MaxFloat64}, {1e21}, {float64(float32(0.1))},
		{"", "a", "Ab é😀", "a\ufffdb", "\u2028<&>\"\\\t\n", "NaN", "Infinity"},
		{true, false}, {ts}, {[]byte{}, []byte{0, 0xff}}, {"12.500", int64(3), []byte("x")},
	}
	for _, k := range keys {
		old, err := v0EncodeKey(k)
		if err != nil {
			t.Fatalf("v0EncodeKey(%#v): %v", k, err)
		}
		now, err := EncodeKey(k)
		if err != nil || now != old {
			t.Errorf("EncodeKey(%#v) = %s, %v; the earlier format wrote %s", k, now, err, old)
		}
		want, _ := v0DecodeKey(old)
		got, err := DecodeKey(old)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeKey(%s) = %#v, %v; the earlier format read %#v", old, got, err, want)
		}
	}
	// Texts as stored by the earlier format, including its lossy ones: a
	// string that was not UTF-8 (json.Marshal replaced each bad byte).
	for _, stored := range []string{`[9223372036854775807]`, `[-1,"Ab é😀"]`, `["2024-02-28T23:02:03.123456Z"]`,
		`[{"hex":"00ff"}]`, `[{"hex":"00FF"}]`, `["12.500"]`, `[true,1.5,"x"]`, `["a\ufffdb"]`, `["\u003c\u2028"]`, `[]`} {
		want, err := v0DecodeKey(stored)
		if err != nil {
			t.Fatalf("v0DecodeKey(%s): %v", stored, err)
		}
		got, err := DecodeKey(stored)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeKey(%s) = %#v, %v; the earlier format read %#v", stored, got, err, want)
		}
	}
	if _, err := v0EncodeKey([]any{math.NaN()}); err == nil {
		t.Error("the earlier format encoded NaN: the frozen copy is wrong")
	}
	if s, _ := v0EncodeKey([]any{"a\xe9b"}); s != `["a\ufffdb"]` {
		t.Errorf("the earlier format wrote %s for a\\xe9b: the frozen copy is wrong", s)
	}
}

// FuzzEncodeKey: any string, and any double, goes through the checkpoint
// exactly: a string as the same bytes, a double as text that parses back
// to the same value (NaN and the infinities included).
func FuzzEncodeKey(f *testing.F) {
	for _, s := range notUTF8 {
		f.Add(s, uint64(0))
	}
	f.Add("é", math.Float64bits(math.NaN()))
	f.Add("", math.Float64bits(math.Inf(-1)))
	f.Fuzz(func(t *testing.T, s string, bits uint64) {
		x := math.Float64frombits(bits)
		enc, err := EncodeKey([]any{s, x})
		if err != nil {
			t.Fatalf("EncodeKey(%q, %v): %v", s, x, err)
		}
		if !utf8.ValidString(enc) {
			t.Fatalf("EncodeKey(%q, %v) = %q is not UTF-8", s, x, enc)
		}
		back, err := DecodeKey(enc)
		if err != nil || len(back) != 2 {
			t.Fatalf("DecodeKey(%s) = %#v, %v", enc, back, err)
		}
		if back[0] != s {
			t.Fatalf("%q went through as %#v (%s)", s, back[0], enc)
		}
		xs, _ := back[1].(string)
		got, err := strconv.ParseFloat(xs, 64)
		if err != nil || !(got == x && math.Signbit(got) == math.Signbit(x) || math.IsNaN(got) && math.IsNaN(x)) {
			t.Fatalf("%v went through as %#v (%s)", x, back[1], enc)
		}
	})
}
