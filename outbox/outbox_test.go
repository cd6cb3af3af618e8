package outbox_test

import (
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/outbox"
	"github.com/migrate-dev/migrate/plans"
)

// forEachTarget runs fn against a fresh database of every target engine
// with the helper tables.
func forEachTarget(t *testing.T, fn func(t *testing.T, st *outbox.Store, db *sql.DB)) {
	for _, e := range testsvc.Engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			dsn, err := plans.ParseDSN(e.NewDB(t))
			if err != nil {
				t.Fatal(err)
			}
			d, err := dialect.For(dsn.Engine())
			if err != nil {
				t.Fatal(err)
			}
			db, d, err := dialect.Open(t.Context(), d, dsn, dialect.Session{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			for _, q := range d.Helpers() {
				if _, err := db.ExecContext(t.Context(), q); err != nil {
					t.Fatal(err)
				}
			}
			fn(t, outbox.New(d), db)
		})
	}
}

func ids(evs []outbox.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return strings.Join(s, ",")
}

// An event is recorded once whatever how often its transaction runs
// again, only when that transaction commits, in the order of the commits
// of its plan; a sink's pending events are those no delivery record of
// that sink names.
func TestStore_AddPendingMark(t *testing.T) {
	forEachTarget(t, func(t *testing.T, st *outbox.Store, db *sql.DB) {
		ctx := t.Context()
		a, b := outbox.ID("p", "shard.done", "orders", 0, 7), outbox.ID("p", "shard.done", "orders", 1, 7)
		if a == b || !strings.HasPrefix(a, "evt_") || len(a) != 28 || a != outbox.ID("p", "shard.done", "orders", 0, 7) {
			t.Fatalf("ids: %q %q", a, b)
		}
		for range 2 { // the second time is a no-op
			if err := st.Add(ctx, db, "p", "shard.done", a, map[string]any{"shard": 0}); err != nil {
				t.Fatal(err)
			}
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Add(ctx, tx, "p", "shard.halted", outbox.ID("p", "shard.halted", "x"), map[string]any{}); err != nil {
			t.Fatal(err)
		}
		_ = tx.Rollback() // a state change that did not commit announces nothing
		if err := st.Add(ctx, db, "other", "plan.done", outbox.ID("other", "plan.done"), nil); err != nil {
			t.Fatal(err)
		}
		if err := st.Add(ctx, db, "p", "shard.done", b, map[string]any{"big": strings.Repeat("x", outbox.MaxData)}); err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(ctx, db, "p")
		if err != nil || len(evs) != 2 || evs[0].ID != a || evs[1].ID != b || evs[0].Seq >= evs[1].Seq {
			t.Fatalf("events: %+v %v", evs, err)
		}
		if string(evs[0].Data) != `{"shard":0}` || !strings.Contains(string(evs[1].Data), `"truncated":true`) {
			t.Fatalf("data: %s / %s", evs[0].Data, evs[1].Data)
		}
		if time.Since(evs[0].At) > time.Hour || time.Since(evs[0].At) < -time.Hour {
			t.Fatalf("at %v is not the database's now", evs[0].At)
		}
		var payload map[string]any
		if err := json.Unmarshal(evs[0].Payload(), &payload); err != nil || payload["id"] != a || payload["type"] != "shard.done" || payload["plan"] != "p" {
			t.Fatalf("payload %s: %v", evs[0].Payload(), err)
		}
		if again, _ := st.Events(ctx, db, "p"); string(again[0].Payload()) != string(evs[0].Payload()) {
			t.Fatal("the payload of an event read again differs")
		}
		if err := st.Mark(ctx, db, "p", "ops", a, outbox.Delivered, 1); err != nil {
			t.Fatal(err)
		}
		if err := st.Mark(ctx, db, "p", "ops", a, outbox.Delivered, 2); err != nil { // a redelivery
			t.Fatal(err)
		}
		if p, err := st.Pending(ctx, db, "p", "ops", 10); err != nil || len(p) != 1 || p[0].ID != b {
			t.Fatalf("pending for ops: %v %v", ids(p), err)
		}
		if p, err := st.Pending(ctx, db, "p", "pager", 1); err != nil || len(p) != 1 || p[0].ID != a {
			t.Fatalf("pending for pager, limit 1: %v %v", ids(p), err)
		}
		dels, err := st.Deliveries(ctx, db, "p")
		if err != nil || len(dels) != 1 || dels[0].Attempts != 2 || dels[0].State != outbox.Delivered {
			t.Fatalf("deliveries: %+v %v", dels, err)
		}
		if err := st.SetSink(ctx, db, "p", "ops", outbox.SinkRecord{LastError: "503\n  Service\tUnavailable", Disabled: true}); err != nil {
			t.Fatal(err)
		}
		rec, err := st.Sink(ctx, db, "p", "ops")
		if err != nil || !rec.Disabled || rec.LastError != "503 Service Unavailable" {
			t.Fatalf("sink: %+v %v", rec, err)
		}
		if err := st.SetSink(ctx, db, "p", "ops", outbox.SinkRecord{}); err != nil {
			t.Fatal(err)
		}
		if rec, err := st.Sink(ctx, db, "p", "ops"); err != nil || rec.Disabled || rec.LastError != "" {
			t.Fatalf("sink enabled again: %+v %v", rec, err)
		}
	})
}

// A target set up before the outbox existed has none: nothing to read.
func TestStore_NoTables(t *testing.T) {
	for _, e := range testsvc.Engines {
		t.Run(e.Name, func(t *testing.T) {
			dsn, err := plans.ParseDSN(e.NewDB(t))
			if err != nil {
				t.Fatal(err)
			}
			d, _ := dialect.For(dsn.Engine())
			db, d, err := dialect.Open(t.Context(), d, dsn, dialect.Session{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			st := outbox.New(d)
			evs, err := st.Events(t.Context(), db, "p")
			dels, derr := st.Deliveries(t.Context(), db, "p")
			recs, serr := st.Sinks(t.Context(), db, "p")
			if err != nil || derr != nil || serr != nil || len(evs)+len(dels)+len(recs) != 0 {
				t.Fatalf("%v %v %v", err, derr, serr)
			}
		})
	}
}
