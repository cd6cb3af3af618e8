package records_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/records"
)

// forEachTarget runs fn against a fresh database of every target engine
// with the helper tables.
func forEachTarget(t *testing.T, fn func(t *testing.T, st *records.Store, db *sql.DB)) {
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
			fn(t, records.New(db, d), db)
		})
	}
}

var shard = fence.Shard{Plan: "p", Table: "public.orders", Index: 1}

// Takeovers are counted within a sliding window by the database's clock;
// the last one's record is kept for status. The counting is checked with a
// window no pause of the test can outlast, the sliding out with a short
// one the test waits out.
func TestStore_Takeovers(t *testing.T) {
	forEachTarget(t, func(t *testing.T, st *records.Store, _ *sql.DB) {
		ctx := t.Context()
		if n, rec, err := st.Takeovers(ctx, shard, time.Minute); err != nil || n != 0 || rec != "" {
			t.Fatalf("no takeover yet: %d %q %v", n, rec, err)
		}
		for i, want := range []int64{1, 2, 3} {
			n, err := st.RecordTakeover(ctx, shard, int64(10+i), time.Minute, `{"token":`+string(rune('0'+i))+`}`)
			if err != nil || n != want {
				t.Fatalf("takeover %d: count %d, %v; want %d", i, n, err, want)
			}
		}
		if n, err := st.RecordTakeover(ctx, shard, 12, time.Minute, `{"again":1}`); err != nil || n != 3 {
			t.Fatalf("the same takeover again: count %d, %v; want 3", n, err)
		}
		n, rec, err := st.Takeovers(ctx, shard, time.Minute)
		if err != nil || n != 3 || rec != `{"token":2}` {
			t.Fatalf("read: %d %q %v; want 3 and the last record", n, rec, err)
		}
		if err := st.NoteTakeover(ctx, shard, 12, `{"rto_ms":5}`); err != nil {
			t.Fatal(err)
		}
		if n, rec, err := st.Takeovers(ctx, shard, time.Minute); err != nil || n != 3 || rec != `{"rto_ms":5}` {
			t.Fatalf("after a note: %d %q %v; want the same count and the new record", n, rec, err)
		}
		other := fence.Shard{Plan: "p", Table: "public.orders", Index: 2}
		if n, rec, err := st.Takeovers(ctx, other, time.Minute); err != nil || n != 0 || rec != "" {
			t.Fatalf("another shard: %d %q %v", n, rec, err)
		}
		short := 300 * time.Millisecond
		time.Sleep(short + 50*time.Millisecond) // the three are older than short from now on
		if n, err := st.RecordTakeover(ctx, shard, 20, short, "{}"); err != nil || n != 1 {
			t.Fatalf("after the window: count %d, %v; want 1 (the older ones slid out)", n, err)
		}
		if _, err := st.RecordTakeover(ctx, shard, 21, 0, "{}"); err == nil {
			t.Fatal("a zero window was accepted")
		}
	})
}

// A holder's progress record is replaced whole and expires: read back while
// kept for a minute, gone once a short keep has certainly passed.
func TestStore_Progress(t *testing.T) {
	forEachTarget(t, func(t *testing.T, st *records.Store, _ *sql.DB) {
		ctx := t.Context()
		if _, ok, err := st.ReadPace(ctx, shard); ok || err != nil {
			t.Fatalf("before any: ok %v, %v", ok, err)
		}
		want := records.Pace{Owner: "a-1", RowsPerSec: 1234.5, EtaMs: 60000, TableRows: 1000000}
		if err := st.PublishPace(ctx, shard, want, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := st.ReadPace(ctx, shard); !ok || err != nil || got != want {
			t.Fatalf("read %+v, %v, %v; want %+v", got, ok, err, want)
		}
		next := records.Pace{Owner: "b-2", EtaMs: -1}
		if err := st.PublishPace(ctx, shard, next, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := st.ReadPace(ctx, shard); !ok || err != nil || got != next {
			t.Fatalf("read %+v, %v, %v; want %+v", got, ok, err, next)
		}
		if err := st.PublishPace(ctx, shard, next, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // past the keep time, however late this runs
		if got, ok, err := st.ReadPace(ctx, shard); ok || err != nil {
			t.Fatalf("after its keep time: %+v, %v, %v; want nothing", got, ok, err)
		}
	})
}

// A target set up before the records moved there has no tables for them:
// status reads none, not an error.
func TestStore_NoTables(t *testing.T) {
	forEachTarget(t, func(t *testing.T, st *records.Store, db *sql.DB) {
		for _, tb := range []string{dialect.TakeoverTable, dialect.ProgressTable} {
			if _, err := db.ExecContext(t.Context(), "DROP TABLE "+tb); err != nil {
				t.Fatal(err)
			}
		}
		if n, rec, err := st.Takeovers(t.Context(), shard, time.Minute); err != nil || n != 0 || rec != "" {
			t.Errorf("takeovers without the table: %d %q %v", n, rec, err)
		}
		if _, ok, err := st.ReadPace(t.Context(), shard); ok || err != nil {
			t.Errorf("progress without the table: %v %v", ok, err)
		}
	})
}
