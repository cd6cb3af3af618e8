package cursor

import (
	"reflect"
	"testing"
	"time"
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
