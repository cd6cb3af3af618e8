package drill

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/status"
)

func TestWatcher_record(t *testing.T) {
	w := newWatcher(nil, 2*time.Second, time.Now(), slog.New(slog.DiscardHandler))
	if w.every != 100*time.Millisecond {
		t.Errorf("sampling every %v, want TTL/20", w.every)
	}
	shard := func(tok int64, holder string) status.ShardStatus {
		return status.ShardStatus{Table: "big", Shard: 0, Watermark: tok, Holder: holder}
	}
	lease := func(owner string, tok int64) []status.LeaseStatus {
		return []status.LeaseStatus{{Table: "big", Shard: 0, Owner: owner, Token: tok}}
	}
	for _, st := range []*status.Status{
		{Tables: []status.ShardStatus{}},                                     // before setup: nothing
		{Tables: []status.ShardStatus{shard(0, "")}},                         // checkpoint, no lease yet: nothing
		{Tables: []status.ShardStatus{shard(1, "a")}, Leases: lease("a", 1)}, // a holds
		{Tables: []status.ShardStatus{shard(1, "a")}, Leases: lease("a", 1)}, // unchanged
		{Tables: []status.ShardStatus{shard(1, "a")}},                        // a's lease expired
		{Tables: []status.ShardStatus{shard(1, "a")}, Leases: lease("b", 2)}, // b acquired
		{Tables: []status.ShardStatus{shard(2, "b")}, Leases: lease("b", 2)}, // b claimed the fence
	} {
		w.record(st, nil)
	}
	var got []Event
	for _, e := range w.events() {
		e.AtMs = 0
		got = append(got, e)
	}
	want := []Event{
		{Kind: "lease", Table: "big", Owner: "a", Token: 1},
		{Kind: "fence", Table: "big", Owner: "a", Token: 1},
		{Kind: "lease", Table: "big"},
		{Kind: "lease", Table: "big", Owner: "b", Token: 2},
		{Kind: "fence", Table: "big", Owner: "b", Token: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %+v\nwant %+v", got, want)
	}
	if p := historyProblems(got, false); len(p) != 0 {
		t.Errorf("problems in a clean history: %v", p)
	}
	if st, _ := w.latest(); st == nil || st.Tables[0].Watermark != 2 {
		t.Errorf("latest sample %+v", st)
	}
}

func TestShortPause(t *testing.T) {
	for _, ttl := range []time.Duration{time.Second, 2 * time.Second, 30 * time.Second} {
		// Below what the lease tolerates between renewals: TTL - TTL/3 - TTL/10 - TTL/100.
		if p := shortPause(ttl); p <= 0 || p >= ttl-ttl/3-ttl/10-ttl/100 {
			t.Errorf("shortPause(%v) = %v", ttl, p)
		}
	}
}
