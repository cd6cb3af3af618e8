package status

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/migrate-dev/migrate/postload"
)

// update rewrites status/testdata/render.golden from what Render writes now:
//
//	go test ./status/ -run TestRender_Golden -update
var update = flag.Bool("update", false, "rewrite status/testdata/render.golden from what Render writes now")

// goldenStatus is a plan's state with every column filled in some row.
func goldenStatus() *Status {
	return &Status{
		Plan: "orders-2024",
		Totals: []TableTotal{
			{Table: "shop.orders", Target: "orders", Shards: 3, ShardsDone: 1, ShardsRunning: 1, RowsDone: 1500,
				RowsEstimated: new(int64(4000)), RowsPerSec: new(212.6), EtaMs: new(int64(11_759))},
			{Table: "shop.order_items", Target: "order_items", Shards: 2, ShardsDone: 0, ShardsRunning: 0, RowsDone: 7},
		},
		Tables: []ShardStatus{
			{Table: "shop.orders", Target: "orders", Shard: 0, State: "done", RowsDone: 1000, LastKey: json.RawMessage(`1000`),
				Token: 4, UpdatedAt: "2024-05-01T10:00:00Z", Watermark: 4, Holder: "b-2",
				Takeovers: 1, LastTakeover: json.RawMessage(`{"token":4,"previous_owner":"a-1","rto_ms":1234,"predicted_rto_ms":33000}`),
				EtaMs: new(int64(0))},
			{Table: "shop.orders", Target: "orders", Shard: 1, State: "running", RowsDone: 500, LastKey: json.RawMessage(`1500`),
				Token: 5, UpdatedAt: "2024-05-01T10:00:01.5Z", Watermark: 5, Holder: "b-2",
				LastTakeover: json.RawMessage(`null`), RowsPerSec: new(212.6), EtaMs: new(int64(2_351))},
			{Table: "shop.orders", Target: "orders", Shard: 2, State: "pending", LastKey: json.RawMessage(`null`),
				UpdatedAt: "2024-05-01T09:59:00Z", LastTakeover: json.RawMessage(`null`)},
			{Table: "shop.order_items", Target: "order_items", Shard: 0, State: "halted", RowsDone: 7, LastKey: json.RawMessage(`[7,"b"]`),
				Token: 2, UpdatedAt: "2024-05-01T09:59:30Z", Watermark: 2, Holder: "a-1",
				Takeovers: 4, LastTakeover: json.RawMessage(`{"token":0}`)}, // a record without a token shows no RTO
			{Table: "shop.order_items", Target: "order_items", Shard: 1, State: "pending", LastKey: json.RawMessage(`null`),
				UpdatedAt: "2024-05-01T09:59:00Z", LastTakeover: json.RawMessage(`null`)},
		},
		PostLoad: &PostLoadStatus{State: postload.Running, Steps: 4, StepsDone: 1},
		Leases: []LeaseStatus{
			{Table: "shop.orders", Target: "orders", Shard: 1, Owner: "b-2", Token: 5, TTLMs: 27_500},
			{Table: "shop.orders", Target: "orders", Shard: 2, Owner: "c-3", Token: 1}, // ZooKeeper: no TTL told
		},
	}
}

func TestRender_Golden(t *testing.T) {
	var buf bytes.Buffer
	if err := Render(&buf, goldenStatus()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "render.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -update)", err)
	}
	if got := buf.String(); got != string(want) {
		t.Errorf("Render differs from %s (rewrite it with -update, and read the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestRender_Empty(t *testing.T) {
	var buf bytes.Buffer
	if err := Render(&buf, &Status{Plan: "p"}); err != nil {
		t.Fatal(err)
	}
	want := "plan p\n" +
		"no checkpoints yet: the plan has not run against this target\n" +
		"TABLE  SHARD  STATE  ROWS  RATE  ETA  LAST KEY  TOKEN  WATERMARK  UPDATED  TAKEOVERS  LAST RTO\n" +
		"leases: none held\n"
	if got := buf.String(); got != want {
		t.Errorf("Render of an empty status:\n%s\nwant:\n%s", got, want)
	}
}

func TestRateAndETA(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Rate(nil), "-"},
		{Rate(new(0.0)), "0 rows/s"},
		{Rate(new(212.6)), "213 rows/s"},
		{ETA(nil), "-"},
		{ETA(new(int64(0))), "0s"},
		{ETA(new(int64(1_499))), "1s"},
		{ETA(new(int64(1_500))), "2s"},
		{ETA(new(int64(3_723_000))), "1h2m3s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
