package dialect

import (
	"math/rand/v2"
	"testing"
	"time"
)

// appendDateTime writes what time's own formatting writes, faster.
func TestAppendDateTime(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	zones := []*time.Location{time.UTC, time.FixedZone("a", 5*3600+1800), time.FixedZone("b", -8*3600), time.FixedZone("c", 3600+7)}
	cases := []time.Time{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2024, 2, 29, 0, 0, 0, 1000, zones[2])}
	for range 2000 {
		cases = append(cases, time.Unix(r.Int64N(253402300799-(-62135596800))-62135596800, r.Int64N(1e9)).In(zones[r.IntN(len(zones))]))
	}
	for _, c := range cases {
		c = c.Truncate(time.Microsecond)
		for _, f := range []struct {
			clock, zone bool
			layout      string
		}{{false, false, "2006-01-02"}, {true, false, "2006-01-02 15:04:05.999999"}, {true, true, "2006-01-02 15:04:05.999999Z07:00"}} {
			want := c.Format(f.layout)
			if c.Nanosecond() != 0 && f.clock { // time trims trailing zeros of the fraction; both forms read back the same
				want = c.Format(f.layout[:len("2006-01-02 15:04:05")] + ".000000" + f.layout[len("2006-01-02 15:04:05.999999"):])
			}
			if _, off := c.Zone(); f.zone && off%60 != 0 {
				want = c.Format("2006-01-02 15:04:05.000000Z07:00:00")
				if c.Nanosecond() == 0 {
					want = c.Format("2006-01-02 15:04:05Z07:00:00")
				}
			}
			if got := string(appendDateTime(nil, c, f.clock, f.zone)); got != want {
				t.Fatalf("%v %+v: %q, want %q", c, f, got, want)
			}
		}
	}
}

func TestBulkEscapes(t *testing.T) {
	for in, want := range map[string]string{"": "", "plain": "plain", "a\\b": `a\\b`, "\t\n\r": `\t\n\r`, "end\\": `end\\`, "\x00": "\x00"} {
		if got := string(pgCopyEscape(nil, in)); got != want {
			t.Errorf("pgCopyEscape(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"a\\b": `a\\b`, "\t\n\r": "\\t\\n\r", "\x00x": `\0x`} {
		if got := string(myLoadEscape(nil, in)); got != want {
			t.Errorf("myLoadEscape(%q) = %q, want %q", in, got, want)
		}
	}
}

// Times are written by the column's type whether it is named as the
// catalog names it or as the type mapping does.
func TestPgCopyTextTimes(t *testing.T) {
	at := time.Date(2024, 2, 29, 23, 59, 59, 5000, time.FixedZone("x", 3600))
	for base, want := range map[string]string{
		"date": "2024-02-29", "timestamp": "2024-02-29 23:59:59.000005", "timestamp without time zone": "2024-02-29 23:59:59.000005",
		"timestamptz": "2024-02-29 23:59:59.000005+01:00", "timestamp with time zone": "2024-02-29 23:59:59.000005+01:00",
	} {
		got, ok := pgCopyText(nil, at, Column{Base: base})
		if !ok || string(got) != want {
			t.Errorf("%s: %q %v, want %q", base, got, ok, want)
		}
	}
	if _, ok := pgCopyText(nil, at, Column{Base: "time without time zone"}); ok {
		t.Error("a time.Time for a time column was written; want it left to the upsert")
	}
}
