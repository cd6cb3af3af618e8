package batch_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/plans"
)

// lease is a lease held for the whole test unless cancelled: the real lease
// is tested in package lock; here only its token and two signals matter.
type lease struct {
	ctx      context.Context
	cancel   context.CancelCauseFunc
	deadline time.Time
	token    fence.Token
}

// newLease is a lease of owner with token t.
func newLease(t testing.TB, token fence.Token) *lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	return &lease{ctx: ctx, cancel: cancel, deadline: time.Now().Add(time.Hour), token: token}
}

func (l *lease) Context() context.Context { return l.ctx }
func (l *lease) Deadline() time.Time      { return l.deadline }
func (l *lease) Token() int64             { return int64(l.token) }
func (l *lease) Owner() string            { return owner }

type env struct {
	src, dst *sql.DB
	copier   *batch.Copier
	spec     batch.Spec
	fence    *fence.Fence
	cursor   *cursor.Store
}

const owner = "holder"

// setup seeds n rows in a fresh source database and prepares a fresh target:
// helper tables, target table, checkpoint, and a watermark claimed by token.
func setup(t testing.TB, n int, token fence.Token) *env {
	t.Helper()
	ctx := context.Background()
	d := dialect.Postgres{}
	open := func(u string) *sql.DB {
		dsn, err := plans.ParseDSN(u)
		if err != nil {
			t.Fatal(err)
		}
		db, err := d.Open(dsn, dialect.SessionFor(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	e := &env{src: open(testsvc.NewPostgresDB(t)), dst: open(testsvc.NewPostgresDB(t)), fence: fence.New(d), cursor: cursor.New(d)}
	mustExec(t, e.src, `CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(10,2))`)
	mustExec(t, e.src, fmt.Sprintf(`INSERT INTO items SELECT g, 'item ' || g, g / 100.0 FROM generate_series(1, %d) g`, n))
	for _, q := range d.Helpers() {
		mustExec(t, e.dst, q)
	}
	mustExec(t, e.dst, `CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(10,2), _fence bigint NOT NULL DEFAULT 0)`)
	e.spec = batch.Spec{
		Shard:  fence.Shard{Plan: "p", Table: "items"},
		Source: []string{"items"}, Target: []string{"items"},
		Columns: []string{"id", "name", "price"}, Key: []string{"id"}, FenceColumn: "_fence",
		BatchSize: 1000, MaxRetries: 2,
	}
	if err := e.cursor.Init(ctx, e.dst, e.spec.Shard, nil, nil); err != nil {
		t.Fatal(err)
	}
	e.claim(t, token, owner)
	e.copier = &batch.Copier{Source: e.src, SourceSQL: d, Target: e.dst, TargetSQL: d, Fence: e.fence, Cursor: e.cursor}
	return e
}

func (e *env) claim(t testing.TB, tok fence.Token, who string) {
	t.Helper()
	tx, err := e.dst.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fence.Claim(context.Background(), tx, e.spec.Shard, tok, who); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func mustExec(t testing.TB, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func count(t testing.TB, db *sql.DB, q string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func TestCopier_Copy(t *testing.T) {
	e := setup(t, 5500, 3)
	res, err := e.copier.Copy(t.Context(), e.spec, newLease(t, 3), cursor.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 5500 || res.Batches != 6 || res.Inserted != 5500 || res.Updated != 0 {
		t.Errorf("result %+v, want 5500 rows inserted in 6 batches", res)
	}
	if n := count(t, e.dst, `SELECT count(*) FROM items WHERE _fence = 3`); n != 5500 {
		t.Errorf("%d target rows carry token 3, want 5500", n)
	}
	if n := count(t, e.dst, `SELECT count(*) FROM items t WHERE name <> 'item ' || id OR price <> id / 100.0`); n != 0 {
		t.Errorf("%d rows differ from the source", n)
	}
	cp, err := e.cursor.Read(t.Context(), e.dst, e.spec.Shard)
	if err != nil || cp.RowsDone != 5500 || fmt.Sprint(cp.LastKey) != "[5500]" || cp.Token != 3 {
		t.Errorf("checkpoint %+v (%v), want 5500 rows after [5500] by token 3", cp, err)
	}
}

func TestCopier_ResumeReplaysOnlyAfterCursor(t *testing.T) {
	e := setup(t, 3000, 2)
	// Rows up to 1500 were written by an earlier holder with token 1; the
	// cursor says 1000 was committed, so 1001..1500 are a replayed batch.
	mustExec(t, e.dst, `INSERT INTO items SELECT g, 'item ' || g, g / 100.0, 1 FROM generate_series(1, 1500) g`)
	mustExec(t, e.dst, `UPDATE _migrate_checkpoint SET rows_done = 1000, last_key = '["1000"]'`)
	res, err := e.copier.Copy(t.Context(), e.spec, newLease(t, 2), cursor.Checkpoint{LastKey: []any{"1000"}, RowsDone: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 2000 || res.Updated != 500 || res.Inserted != 1500 {
		t.Errorf("result %+v, want 2000 rows: 500 replayed, 1500 new", res)
	}
	if n := count(t, e.dst, `SELECT count(*) FROM items WHERE _fence = 1`); n != 1000 {
		t.Errorf("%d rows before the cursor were rewritten, want none (1000 keep token 1)", 1000-n)
	}
	if n := count(t, e.dst, `SELECT rows_done FROM _migrate_checkpoint`); n != 3000 {
		t.Errorf("checkpoint rows_done %d, want 3000", n)
	}
}

// Rows in the target with a newer token than the writer's, though the fence
// check passed, mean another writer owns the table: the batch rolls back and
// the shard halts instead of reporting rows it did not write.
func TestCopier_NewerRowsHalt(t *testing.T) {
	e := setup(t, 3000, 2)
	mustExec(t, e.dst, `INSERT INTO items VALUES (1500, 'other', 1, 99)`)
	res, err := e.copier.Copy(t.Context(), e.spec, newLease(t, 2), cursor.Checkpoint{})
	if !errors.Is(err, hold.ErrHalted) {
		t.Fatalf("Copy = %v, want hold.ErrHalted", err)
	}
	if res.Rows != 1000 {
		t.Errorf("copied %d rows, want the 1000 before the foreign row's batch", res.Rows)
	}
	if n := count(t, e.dst, `SELECT count(*) FROM items`); n != 1001 {
		t.Errorf("target has %d rows, want 1001: the batch holding the foreign row rolled back", n)
	}
}

func TestCopier_StaleTokenStopsAtOnce(t *testing.T) {
	e := setup(t, 5000, 4)
	l := newLease(t, 4)
	e.copier.OnBatch = func(_ fence.Shard, p batch.Committed) {
		if fmt.Sprint(p.LastKey) == "[2000]" {
			e.claim(t, 5, "successor") // a successor takes over after two batches
		}
	}
	_, err := e.copier.Copy(t.Context(), e.spec, l, cursor.Checkpoint{})
	var st *fence.StaleError
	if !errors.As(err, &st) || st.Watermark != 5 || st.Holder != "successor" {
		t.Fatalf("Copy = %v, want a StaleError naming token 5 of successor", err)
	}
	if n := count(t, e.dst, `SELECT count(*) FROM items`); n != 2000 {
		t.Errorf("target has %d rows, want the 2000 written before the takeover", n)
	}
	if n := count(t, e.dst, `SELECT rows_done FROM _migrate_checkpoint`); n != 2000 {
		t.Errorf("checkpoint rows_done %d, want 2000", n)
	}
}

func TestCopier_LeaseLostStopsWriting(t *testing.T) {
	e := setup(t, 5000, 1)
	l := newLease(t, 1)
	e.copier.OnBatch = func(_ fence.Shard, p batch.Committed) {
		if fmt.Sprint(p.LastKey) == "[3000]" {
			l.cancel(errors.New("renewal failed"))
		}
	}
	_, err := e.copier.Copy(t.Context(), e.spec, l, cursor.Checkpoint{})
	if !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Copy = %v, want ErrLeaseLost", err)
	}
	if n := count(t, e.dst, `SELECT count(*) FROM items`); n != 3000 {
		t.Errorf("target has %d rows, want 3000: nothing after the loss", n)
	}
}

// A batch does not start when it could not commit before the lease's local
// deadline; it waits for a renewal, and gives up when the lease is lost.
func TestCopier_NoBatchPastDeadline(t *testing.T) {
	e := setup(t, 2000, 1)
	l := newLease(t, 1)
	l.deadline = time.Now().Add(5 * time.Millisecond)
	go func() {
		time.Sleep(300 * time.Millisecond)
		l.cancel(errors.New("local deadline passed"))
	}()
	_, err := e.copier.Copy(t.Context(), e.spec, l, cursor.Checkpoint{})
	if !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Copy = %v, want ErrLeaseLost", err)
	}
	if n := count(t, e.dst, `SELECT count(*) FROM items`); n != 0 {
		t.Errorf("target has %d rows, want 0", n)
	}
}

func TestCopier_HaltsAfterRetries(t *testing.T) {
	e := setup(t, 100, 1)
	mustExec(t, e.dst, `ALTER TABLE items ADD CONSTRAINT cheap CHECK (price < 0.5)`)
	_, err := e.copier.Copy(t.Context(), e.spec, newLease(t, 1), cursor.Checkpoint{})
	if !errors.Is(err, hold.ErrHalted) {
		t.Fatalf("Copy = %v, want hold.ErrHalted", err)
	}
	if n := count(t, e.dst, `SELECT count(*) FROM items`); n != 0 {
		t.Errorf("target has %d rows, want 0: every attempt rolled back", n)
	}
}

// insertSQL is a plain multi-row INSERT of n rows of items.
func insertSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO items (id, name, price) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "($%d, $%d, $%d)", 3*i+1, 3*i+2, 3*i+3)
	}
	return b.String()
}

// BenchmarkCopy measures the fenced copy (fence check, idempotent upsert,
// cursor advance per batch) against a baseline of plain multi-row INSERTs of
// the same batches, one transaction each, in the same run — what a
// hand-written script does (read a page, then write it; no prefetch). The ratio is the
// cost of the recovery guarantees.
func BenchmarkCopy(b *testing.B) {
	const rows = 100000
	e := setup(b, rows, 1)
	b.Run("baseline-insert", func(b *testing.B) {
		for b.Loop() {
			mustExec(b, e.dst, `TRUNCATE items`)
			var after any = int64(0)
			for {
				r, err := e.src.Query(`SELECT id, name, price FROM items WHERE id > $1 ORDER BY id LIMIT 1000`, after)
				if err != nil {
					b.Fatal(err)
				}
				var args []any
				for r.Next() {
					var id int64
					var name, price string
					if err := r.Scan(&id, &name, &price); err != nil {
						b.Fatal(err)
					}
					args = append(args, id, name, price)
					after = id
				}
				r.Close()
				if len(args) == 0 {
					break
				}
				q := insertSQL(len(args) / 3)
				tx, _ := e.dst.Begin()
				if _, err := tx.Exec(q, args...); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("fenced-copy", func(b *testing.B) {
		tok, _, err := e.fence.Watermark(context.Background(), e.dst, e.spec.Shard)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			b.StopTimer()
			mustExec(b, e.dst, `TRUNCATE items`)
			tok++
			e.claim(b, tok, owner)
			b.StartTimer()
			if _, err := e.copier.Copy(context.Background(), e.spec, newLease(b, tok), cursor.Checkpoint{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// A table that passthrough may not copy between the two servers (an
// interval between major versions: dialect.Postgres.Passthrough) is copied
// by decoding its rows, every value intact. The source's version is read
// from the server; the target's is given, two majors newer.
func TestCopier_PassthroughRefusedDecodes(t *testing.T) {
	e := setup(t, 0, 4)
	ctx := t.Context()
	mustExec(t, e.src, `CREATE TABLE spans (id bigint PRIMARY KEY, d interval, n numeric)`)
	mustExec(t, e.src, `INSERT INTO spans VALUES (1, '178956970 years 7 mons 2147483647 days 2562047788:00:54.775807', 'NaN'),
  (2, '-1 days +00:00:01.5', 1.5), (3, NULL, NULL), (4, '0', -0.000001)`)
	mustExec(t, e.dst, `CREATE TABLE spans (id bigint PRIMARY KEY, d interval, n numeric, _fence bigint NOT NULL DEFAULT 0)`)
	d, err := dialect.Postgres{}.Detect(ctx, e.src)
	if err != nil {
		t.Fatal(err)
	}
	src := d.(dialect.Postgres)
	dst := dialect.Postgres{Server: dialect.PgServer{Major: src.Server.Major + 2, IntegerDatetimes: true}}
	cols := []dialect.Column{{Name: "id", Type: "bigint", Base: "bigint"}, {Name: "d", Type: "interval", Base: "interval"}, {Name: "n", Type: "numeric", Base: "numeric"}}
	if !src.Passthrough(src, cols, cols, []string{"id"}) {
		t.Fatal("passthrough refused between a server and itself")
	}
	e.spec.Source, e.spec.Target, e.spec.Columns, e.spec.Types = []string{"spans"}, []string{"spans"}, []string{"id", "d", "n"}, cols
	e.spec.Passthrough = dst.Passthrough(src, cols, cols, []string{"id"})
	if e.spec.Passthrough {
		t.Fatalf("passthrough allowed from PostgreSQL %d to %d for %v", src.Server.Major, dst.Server.Major, cols)
	}
	e.copier.SourceSQL, e.copier.TargetSQL = src, dst
	res, err := e.copier.Copy(ctx, e.spec, newLease(t, 4), cursor.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 4 || res.Profile.PerBatch()["encode"] == 0 {
		t.Errorf("result %+v, phases %v: want 4 rows, encoded (read by decoding)", res, res.Profile.PerBatch())
	}
	const rows = `SELECT string_agg(concat_ws('|', id, d, n), ',' ORDER BY id) FROM spans`
	var want, got string
	if err := e.src.QueryRow(rows).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if err := e.dst.QueryRow(rows).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("target rows %s, source rows %s", got, want)
	}
}
