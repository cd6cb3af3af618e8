package status

import (
	"context"
	"database/sql"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/lock/dblock"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/postload"
	"github.com/migrate-dev/migrate/records"
)

const leaseTTL = 10 * time.Second

// readerEnv is a Reader of a plan on a fresh target, built as
// cmd/migrate's openStatus builds it, with the plan's leases in a table
// of the target (lock: db).
type readerEnv struct {
	db *sql.DB
	d  dialect.Dialect
	rd *Reader
}

func forEachReader(t *testing.T, helpers bool, plan func(name string) *plans.Plan, fn func(t *testing.T, e readerEnv)) {
	t.Helper()
	for _, eng := range testsvc.Engines {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := t.Context()
			dsn, err := plans.ParseDSN(eng.NewDB(t))
			if err != nil {
				t.Fatal(err)
			}
			d, err := dialect.For(dsn.Engine())
			if err != nil {
				t.Fatal(err)
			}
			db, d, err := dialect.Open(ctx, d, dsn, dialect.SessionFor(leaseTTL))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			if helpers {
				for _, q := range d.Helpers() {
					if _, err := db.ExecContext(ctx, q); err != nil {
						t.Fatal(err)
					}
				}
			}
			s := dialect.SessionFor(leaseTTL)
			s.Lease = true
			ldb, ld, err := dialect.Open(ctx, d, dsn, s)
			if err != nil {
				t.Fatal(err)
			}
			locker, err := lock.New(dblock.New(ldb, ld, "db (the target)", nil), lock.Options{TTL: leaseTTL})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = locker.Close() })
			p := plan(testsvc.Prefix(t))
			p.Target = dsn
			fn(t, readerEnv{db: db, d: d, rd: &Reader{Plan: p, Target: db, SQL: d, Cursor: cursor.New(d), Fence: fence.New(d),
				Records: records.New(db, d), Locker: locker, Steps: postload.Store{Plan: p.Name, SQL: d}}})
		})
	}
}

func TestReader_ReadNoCheckpoints(t *testing.T) {
	plan := func(name string) *plans.Plan {
		return &plans.Plan{Name: name, TakeoverWindow: time.Minute, Tables: []plans.Table{{Name: "shop.orders", Target: "orders", Shards: 2}}}
	}
	forEachReader(t, false, plan, func(t *testing.T, e readerEnv) {
		st, err := e.rd.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want := &Status{Plan: e.rd.Plan.Name, Tables: []ShardStatus{}, Leases: []LeaseStatus{},
			Totals: []TableTotal{{Table: "shop.orders", Target: "orders", Shards: 2}}, Notify: []SinkStatus{}, Events: []EventStatus{}}
		if !reflect.DeepEqual(st, want) {
			t.Errorf("status of a plan not set up\n got %+v\nwant %+v", st, want)
		}
		n, units, err := e.rd.Remembered(t.Context())
		if err != nil || n != 0 || len(units) != 5 {
			t.Errorf("Remembered = %d, %v, %v; want 0 of 5 units (2 shards, the post-load phase, the stream, the delivery)", n, units, err)
		}
	})
}

func TestReader_Read(t *testing.T) {
	plan := func(name string) *plans.Plan {
		return &plans.Plan{Name: name, TakeoverWindow: time.Hour, Tables: []plans.Table{
			{Name: "shop.orders", Target: "orders", Shards: 2},
			{Name: "shop.items", Target: "items", Shards: plans.ShardsAuto},
		}}
	}
	forEachReader(t, true, plan, func(t *testing.T, e readerEnv) {
		ctx := t.Context()
		rd := e.rd
		sh := func(table string, i int) fence.Shard { return fence.Shard{Plan: rd.Plan.Name, Table: table, Index: i} }
		o0, o1, i0, i1, i2 := sh("orders", 0), sh("orders", 1), sh("items", 0), sh("items", 1), sh("items", 2)
		for _, s := range []fence.Shard{o0, o1, i0, i1, i2} {
			if err := rd.Cursor.Init(ctx, e.db, s, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		inTx(t, e.db, func(tx *sql.Tx) error { return rd.Fence.Claim(ctx, tx, o0, 3, "writer-a") })
		inTx(t, e.db, func(tx *sql.Tx) error { return rd.Cursor.Advance(ctx, tx, o0, []any{int64(42)}, 0, 42, 3) })
		inTx(t, e.db, func(tx *sql.Tx) error { return rd.Cursor.Advance(ctx, tx, o1, []any{int64(9), "b"}, 0, 58, 2) })
		inTx(t, e.db, func(tx *sql.Tx) error { return rd.Cursor.SetState(ctx, tx, o1, cursor.Done, 2) })
		inTx(t, e.db, func(tx *sql.Tx) error { return rd.Cursor.Advance(ctx, tx, i0, []any{"k"}, 0, 7, 1) })
		takeover := `{"token":3,"previous_owner":"writer-z","rto_ms":1200,"predicted_rto_ms":11000}`
		if _, err := rd.Records.RecordTakeover(ctx, o0, 3, time.Hour, takeover); err != nil {
			t.Fatal(err)
		}
		lease, err := rd.Locker.Acquire(ctx, hold.Base(o0), "writer-a")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = lease.Release(context.WithoutCancel(ctx)) }()
		for _, p := range []struct {
			s fence.Shard
			p records.Pace
		}{
			{o0, records.Pace{Owner: "writer-a", RowsPerSec: 20, EtaMs: 2900, TableRows: 300}},  // the holder's
			{i0, records.Pace{Owner: "writer-gone", RowsPerSec: 50, EtaMs: 100, TableRows: 90}}, // not the holder's
		} {
			if err := rd.Records.PublishPace(ctx, p.s, p.p, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		steps := rd.Steps
		err = steps.Record(ctx, e.db, []postload.TableSteps{{Target: "orders", Steps: []dialect.Step{
			{Kind: dialect.StepIndex, Name: "orders_a_idx", SQL: "-"}, {Kind: dialect.StepForeignKey, Name: "orders_b_fk", SQL: "-"}}}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := steps.MarkDone(ctx, e.db, 4, 1); err != nil {
			t.Fatal(err)
		}

		before := time.Now().Add(-time.Minute)
		st, err := rd.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Tables) != 5 {
			t.Fatalf("%d shards, want 5: %+v", len(st.Tables), st.Tables)
		}
		for _, s := range st.Tables {
			u, err := time.Parse(time.RFC3339Nano, s.UpdatedAt)
			if err != nil || u.Before(before) || !u.Before(time.Now().Add(time.Minute)) {
				t.Errorf("%s#%d updated at %q, want about now (%v)", s.Target, s.Shard, s.UpdatedAt, err)
			}
		}
		byShard := map[fence.Shard]ShardStatus{}
		for _, s := range st.Tables {
			byShard[sh(s.Target, s.Shard)] = s
		}
		type view struct {
			Table, State, LastKey string
			Rows, Token, Water    int64
			Holder                string
			Takeovers             int64
			Rate                  *float64
			Eta                   *int64
		}
		got := func(s fence.Shard) view {
			x := byShard[s]
			return view{x.Table, x.State, string(x.LastKey), x.RowsDone, x.Token, x.Watermark, x.Holder, x.Takeovers, x.RowsPerSec, x.EtaMs}
		}
		for s, want := range map[fence.Shard]view{
			o0: {"shop.orders", "running", `42`, 42, 3, 3, "writer-a", 1, new(20.0), new(int64(2900))},
			o1: {"shop.orders", "done", `[9,"b"]`, 58, 2, 0, "", 0, nil, new(int64(0))},
			i0: {"shop.items", "running", `"k"`, 7, 1, 0, "", 0, nil, nil}, // progress of no current holder
			i1: {"shop.items", "pending", `null`, 0, 0, 0, "", 0, nil, nil},
			i2: {"shop.items", "pending", `null`, 0, 0, 0, "", 0, nil, nil},
		} {
			if g := got(s); !reflect.DeepEqual(g, want) {
				t.Errorf("%s\n got %+v\nwant %+v", s, show(g), show(want))
			}
		}
		var gotTk, wantTk any
		if err := json.Unmarshal(byShard[o0].LastTakeover, &gotTk); err != nil {
			t.Fatalf("last takeover %s: %v", byShard[o0].LastTakeover, err)
		}
		_ = json.Unmarshal([]byte(takeover), &wantTk)
		if !reflect.DeepEqual(gotTk, wantTk) {
			t.Errorf("last takeover %s, want %s", byShard[o0].LastTakeover, takeover)
		}
		if string(byShard[o1].LastTakeover) != "null" {
			t.Errorf("last takeover of a shard never taken over: %s, want null", byShard[o1].LastTakeover)
		}

		wantTotals := []TableTotal{
			{Table: "shop.orders", Target: "orders", Shards: 2, ShardsDone: 1, ShardsRunning: 1, RowsDone: 100,
				RowsEstimated: new(int64(300)), RowsPerSec: new(20.0), EtaMs: new(int64(10000))},
			{Table: "shop.items", Target: "items", Shards: 3, ShardsRunning: 1, RowsDone: 7}, // auto: its 3 checkpoints
		}
		if !reflect.DeepEqual(st.Totals, wantTotals) {
			t.Errorf("totals\n got %s\nwant %s", show(st.Totals), show(wantTotals))
		}
		if len(st.Leases) != 1 {
			t.Fatalf("leases %+v, want the one of orders#0", st.Leases)
		}
		l := st.Leases[0]
		if l.Table != "shop.orders" || l.Target != "orders" || l.Shard != 0 || l.Owner != "writer-a" || l.Token != lease.Token() || l.TTLMs <= 0 || l.TTLMs > leaseTTL.Milliseconds() {
			t.Errorf("lease %+v, want orders#0 held by writer-a with token %d and a TTL within %v", l, lease.Token(), leaseTTL)
		}
		if want := (&PostLoadStatus{State: postload.Pending, Steps: 2, StepsDone: 1}); !reflect.DeepEqual(st.PostLoad, want) {
			t.Errorf("post-load %+v, want %+v", st.PostLoad, want)
		}
		n, units, err := rd.Remembered(ctx)
		if err != nil || n != 1 || len(units) != 8 {
			t.Errorf("Remembered = %d, %d units, %v; want 1 of 8 (2 + 3 shards, the post-load phase, the stream, the delivery)", n, len(units), err)
		}
		if got, want := rd.PredictedRTO(), leaseTTL+leaseTTL/10; got != want {
			t.Errorf("PredictedRTO = %v, want %v (TTL + poll)", got, want)
		}
	})
}

// inTx runs fn in a transaction, committed when fn returns nil.
func inTx(t *testing.T, db *sql.DB, fn func(tx *sql.Tx) error) {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint names its table by target name; status shows it by the
// plan's source name, also when that target name is another table's
// source name (a rename: orders_v2 becomes orders, orders is archived).
func TestReader_ReadNamesByTarget(t *testing.T) {
	plan := func(name string) *plans.Plan {
		return &plans.Plan{Name: name, TakeoverWindow: time.Hour, Tables: []plans.Table{
			{Name: "orders_v2", Target: "orders", Shards: 1},
			{Name: "orders", Target: "orders_archive", Shards: 1},
		}}
	}
	forEachReader(t, true, plan, func(t *testing.T, e readerEnv) {
		for _, target := range []string{"orders", "orders_archive"} {
			if err := e.rd.Cursor.Init(t.Context(), e.db, fence.Shard{Plan: e.rd.Plan.Name, Table: target}, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		st, err := e.rd.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"orders": "orders_v2", "orders_archive": "orders"}
		for _, s := range st.Tables {
			if s.Table != want[s.Target] {
				t.Errorf("the shard of target %s is shown as table %s, want %s", s.Target, s.Table, want[s.Target])
			}
		}
	})
}
