package status

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/outbox"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/postload"
	"github.com/migrate-dev/migrate/stream/apply"
)

// shard is a ShardStatus of table orders (or other) for total's tests.
func shard(target string, state cursor.State, rows int64, rate *float64) ShardStatus {
	return ShardStatus{Table: "src." + target, Target: target, State: string(state), RowsDone: rows, RowsPerSec: rate}
}

// show is v as JSON, its optional fields' values shown, for messages.
func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestTotal(t *testing.T) {
	orders := plans.Table{Name: "src.orders", Target: "orders"}
	type want struct {
		done, running int
		rows          int64
		est           *int64
		rate          *float64
		eta           *int64
	}
	for _, c := range []struct {
		name      string
		n         int
		shards    []ShardStatus
		estimates map[string]int64
		want      want
	}{
		{
			name: "every shard done: eta 0",
			n:    2,
			shards: []ShardStatus{
				shard("orders", cursor.Done, 400, nil),
				shard("orders", cursor.Done, 600, nil),
			},
			estimates: map[string]int64{"orders": 990},
			want:      want{done: 2, rows: 1000, est: new(int64(1000)), eta: new(int64(0))},
		},
		{
			name: "running shards' rates summed, eta of the rows left",
			n:    4,
			shards: []ShardStatus{
				shard("orders", cursor.Done, 100, nil),
				shard("orders", cursor.Running, 50, new(10.0)),
				shard("orders", cursor.Running, 50, new(30.0)),
				shard("orders", cursor.Pending, 0, nil),
			},
			estimates: map[string]int64{"orders": 1000},
			want:      want{done: 1, running: 2, rows: 200, est: new(int64(1000)), rate: new(40.0), eta: new(int64(20000))},
		},
		{
			name: "an estimate below the rows done is raised to them",
			n:    2,
			shards: []ShardStatus{
				shard("orders", cursor.Done, 150, nil),
				shard("orders", cursor.Running, 50, new(5.0)),
			},
			estimates: map[string]int64{"orders": 120},
			want:      want{done: 1, running: 1, rows: 200, est: new(int64(200)), rate: new(5.0), eta: new(int64(0))},
		},
		{
			name: "no running shard with a rate: no rate, no eta",
			n:    3,
			shards: []ShardStatus{
				shard("orders", cursor.Running, 10, nil),
				shard("orders", cursor.Halted, 20, nil),
				shard("orders", cursor.Done, 30, new(99.0)), // a done shard's rate does not count
			},
			estimates: map[string]int64{"orders": 100},
			want:      want{done: 1, running: 1, rows: 60, est: new(int64(100))},
		},
		{
			name:   "a rate without an estimate: no eta",
			n:      1,
			shards: []ShardStatus{shard("orders", cursor.Running, 10, new(2.5))},
			want:   want{running: 1, rows: 10, rate: new(2.5)},
		},
		{
			name:      "a rate of zero: no eta",
			n:         1,
			shards:    []ShardStatus{shard("orders", cursor.Running, 10, new(0.0))},
			estimates: map[string]int64{"orders": 100},
			want:      want{running: 1, rows: 10, est: new(int64(100)), rate: new(0.0)},
		},
		{
			name: "shards of other tables ignored",
			n:    2,
			shards: []ShardStatus{
				shard("items", cursor.Running, 1000, new(500.0)),
				shard("orders", cursor.Running, 10, new(1.0)),
				shard("items", cursor.Done, 1000, nil),
				shard("orders", cursor.Pending, 0, nil),
			},
			estimates: map[string]int64{"orders": 110, "items": 5000},
			want:      want{running: 1, rows: 10, est: new(int64(110)), rate: new(1.0), eta: new(int64(100000))},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := total(orders, c.n, c.shards, c.estimates)
			w := TableTotal{Table: "src.orders", Target: "orders", Shards: c.n, ShardsDone: c.want.done, ShardsRunning: c.want.running,
				RowsDone: c.want.rows, RowsEstimated: c.want.est, RowsPerSec: c.want.rate, EtaMs: c.want.eta}
			if !reflect.DeepEqual(got, w) {
				t.Errorf("total\n got %s\nwant %s", show(got), show(w))
			}
		})
	}
}

func TestLastKeyJSON(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`[42]`, `42`},           // a one-part key is its value: numbers stay numbers
		{`["ab\"c"]`, `"ab\"c"`}, // strings stay JSON strings
		{`[7,"x"]`, `[7,"x"]`},   // a composite key is an array
		{`[1, 2.5, "z"]`, `[1, 2.5, "z"]`},
		{``, `null`},        // before the first batch
		{`[7,`, `null`},     // not JSON
		{`{"a":1}`, `null`}, // not an array
		{`"7"`, `null`},
	} {
		got := lastKeyJSON(c.text)
		if string(got) != c.want {
			t.Errorf("lastKeyJSON(%q) = %s, want %s", c.text, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("lastKeyJSON(%q) = %s, not JSON", c.text, got)
		}
	}
}

func TestShards(t *testing.T) {
	p := &plans.Plan{Name: "p", Tables: []plans.Table{
		{Name: "fixed", Target: "fixed", Shards: 4},                         // keeps the plan's, whatever the checkpoints
		{Name: "auto", Target: "auto_t", Shards: plans.ShardsAuto},          // split by setup: its checkpoints
		{Name: "resolved", Target: "resolved", Shards: 2, AutoShards: true}, // set by setup, re-split since
		{Name: "new", Target: "new", Shards: plans.ShardsAuto},              // not set up yet
		{Name: "fixed_new", Target: "fixed_new", Shards: 3},                 // not set up yet
	}}
	var cps []cursor.Checkpoint
	add := func(table string, n int) {
		for i := range n {
			cps = append(cps, cursor.Checkpoint{Shard: fence.Shard{Plan: "p", Table: table, Index: i}})
		}
	}
	add("fixed", 2)
	add("auto_t", 3)
	add("resolved", 5)
	add("auto", 7) // a source name: shards are counted by target name
	want := map[string]int{"fixed": 4, "auto_t": 3, "resolved": 5, "new": plans.ShardsAuto, "fixed_new": 3}
	if got := Shards(p, cps); !reflect.DeepEqual(got, want) {
		t.Errorf("Shards = %v, want %v", got, want)
	}
}

func TestUnits(t *testing.T) {
	p := &plans.Plan{Name: "p", Tables: []plans.Table{{Name: "a", Target: "ta"}, {Name: "b", Target: "tb"}, {Name: "c", Target: "tc"}}}
	got := Units(p, map[string]int{"ta": 2, "tb": 1}) // tc: no shard known
	want := []fence.Shard{{Plan: "p", Table: "ta", Index: 0}, {Plan: "p", Table: "ta", Index: 1}, {Plan: "p", Table: "tb", Index: 0}, postload.Unit("p"), apply.Unit("p"), outbox.Unit("p")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Units = %v, want %v", got, want)
	}
	if got := Units(&plans.Plan{Name: "q"}, nil); !reflect.DeepEqual(got, []fence.Shard{postload.Unit("q"), apply.Unit("q"), outbox.Unit("q")}) {
		t.Errorf("Units of a plan without tables = %v, want only its post-load phase, its stream and its delivery", got)
	}
}

// A `shards: auto` table that setup has not split yet has no shard known
// (Shards gives the plan's 0): none is done, and its ETA is unknown, not
// the 0 that says "done" (docs/cli.md: eta_ms is 0 once done).
func TestTotal_NoShardKnown(t *testing.T) {
	got := total(plans.Table{Name: "new", Target: "new", Shards: plans.ShardsAuto}, 0, nil, nil)
	if got.EtaMs != nil {
		t.Errorf("a table with no shard known has eta_ms %d, want null", *got.EtaMs)
	}
}
