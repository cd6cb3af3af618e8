package records

import (
	"context"
	"testing"
	"time"
)

// Takeovers are counted within a sliding window by the server's clock; the
// last one's record is kept for status. The counting is checked with a
// window no pause of the test can outlast, the sliding out with a short one
// the test waits out.
func TestStore_Takeovers(t *testing.T) {
	rdb := sharedClient(t)
	l := New(rdb)
	base := newBase(t, rdb)
	ctx := t.Context()
	if n, rec, err := l.Takeovers(ctx, base, time.Minute); err != nil || n != 0 || rec != "" {
		t.Fatalf("no takeover yet: %d %q %v", n, rec, err)
	}
	window := time.Minute
	for i, want := range []int64{1, 2, 3} {
		n, err := l.RecordTakeover(ctx, base, int64(10+i), window, `{"token":`+string(rune('0'+i))+`}`)
		if err != nil || n != want {
			t.Fatalf("takeover %d: count %d, %v; want %d", i, n, err, want)
		}
	}
	n, rec, err := l.Takeovers(ctx, base, window)
	if err != nil || n != 3 || rec != `{"token":2}` {
		t.Fatalf("read: %d %q %v; want 3 and the last record", n, rec, err)
	}
	if err := l.NoteTakeover(ctx, base, window, `{"rto_ms":5}`); err != nil {
		t.Fatal(err)
	}
	if n, rec, err := l.Takeovers(ctx, base, window); err != nil || n != 3 || rec != `{"rto_ms":5}` {
		t.Fatalf("after a note: %d %q %v; want the same count and the new record", n, rec, err)
	}
	short := 300 * time.Millisecond
	time.Sleep(short + 50*time.Millisecond) // the three are older than short from now on
	if n, err := l.RecordTakeover(ctx, base, 20, short, "{}"); err != nil || n != 1 {
		t.Fatalf("after the window: count %d, %v; want 1 (the older ones slid out)", n, err)
	}
	if _, err := l.RecordTakeover(ctx, base, 21, 0, "{}"); err == nil {
		t.Fatal("a zero window was accepted")
	}
}

// A holder's progress record is replaced whole and expires: read back while
// kept for a minute, gone once a short keep has certainly passed.
func TestStore_Progress(t *testing.T) {
	rdb := sharedClient(t)
	l := New(rdb)
	base := newBase(t, rdb)
	t.Cleanup(func() { rdb.Del(context.WithoutCancel(t.Context()), progressKey(base)) })
	ctx := t.Context()
	if _, ok, err := l.ReadProgress(ctx, base); ok || err != nil {
		t.Fatalf("before any: ok %v, %v", ok, err)
	}
	want := Progress{Owner: "a-1", RowsPerSec: 1234.5, EtaMs: 60000, TableRows: 1000000}
	if err := l.PublishProgress(ctx, base, want, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := l.ReadProgress(ctx, base); !ok || err != nil || got != want {
		t.Fatalf("read %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if pttl := rdb.PTTL(ctx, progressKey(base)).Val(); pttl <= 0 || pttl > time.Minute {
		t.Errorf("progress kept for %v, want at most the minute asked", pttl)
	}
	// Another holder's record, without a rate or an estimate: nothing of
	// the first one is left.
	next := Progress{Owner: "b-2", EtaMs: -1}
	if err := l.PublishProgress(ctx, base, next, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := l.ReadProgress(ctx, base); !ok || err != nil || got != next {
		t.Fatalf("read %+v, %v, %v; want %+v", got, ok, err, next)
	}
	if err := l.PublishProgress(ctx, base, next, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the keep time, however late this runs
	if got, ok, err := l.ReadProgress(ctx, base); ok || err != nil {
		t.Fatalf("after its keep time: %+v, %v, %v; want nothing", got, ok, err)
	}
}
