package verify_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/verify"
)

func openPG(t testing.TB) *sql.DB {
	t.Helper()
	dsn, err := plans.ParseDSN(testsvc.NewPostgresDB(t))
	if err != nil {
		t.Fatal(err)
	}
	db, err := dialect.Postgres{}.Open(dsn, dialect.Session{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func mustExec(t testing.TB, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

const seed = `CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(12,2), at timestamptz, doc jsonb);
INSERT INTO items SELECT g, 'item ' || g, g / 100.0, timestamptz '2024-01-01' + g * interval '1 second', jsonb_build_object('g', g) FROM generate_series(1, %d) g`

func sides(t testing.TB, n int) (verify.Side, verify.Side) {
	src, dst := openPG(t), openPG(t)
	mustExec(t, src, fmt.Sprintf(seed, n))
	mustExec(t, dst, fmt.Sprintf(seed, n))
	mustExec(t, dst, `ALTER TABLE items ADD COLUMN _fence bigint NOT NULL DEFAULT 7`)
	cols := []dialect.Column{{Name: "id", Base: "bigint"}, {Name: "name", Base: "text"}, {Name: "price", Base: "numeric"},
		{Name: "at", Base: "timestamp with time zone"}, {Name: "doc", Base: "jsonb"}}
	return verify.Side{DB: src, SQL: dialect.Postgres{}, Table: []string{"items"}, Columns: cols},
		verify.Side{DB: dst, SQL: dialect.Postgres{}, Table: []string{"items"}, Columns: cols}
}

// TestCompare runs both methods on the same tables: every row, and chunk
// checksums narrowed to rows (chunks of 100 rows: the differences fall in
// the first, the fifth and the open last one).
func TestCompare(t *testing.T) {
	src, dst := sides(t, 1000)
	ctx := t.Context()
	methods := []struct {
		name             string
		chunk            int
		chunks, narrowed int64
	}{{"rows", -1, 0, 0}, {"checksum", 100, 11, 3}}
	for _, m := range methods {
		o := verify.Options{Name: "items", Key: []string{"id"}, MaxSamples: 100, ChunkRows: m.chunk}
		res, err := verify.Compare(ctx, src, dst, o)
		if err != nil || !res.Equal() || res.SourceRows != 1000 || res.TargetRows != 1000 || res.Method != m.name || res.Narrowed != 0 {
			t.Fatalf("%s: equal copy: %+v %v", m.name, res, err)
		}
	}
	mustExec(t, dst.DB, `DELETE FROM items WHERE id IN (1, 500);
UPDATE items SET price = price + 0.01 WHERE id = 2;
UPDATE items SET name = '' WHERE id = 3;
UPDATE items SET at = at + interval '1 microsecond' WHERE id = 4;
UPDATE items SET doc = '{"g": 5, "x": 1}' WHERE id = 5;
UPDATE items SET _fence = 99 WHERE id = 6;
INSERT INTO items VALUES (0, 'before', 1, now(), '{}'), (5000, 'after', 1, now(), '{}'), (5001, 'after', 1, now(), '{}')`)
	mustExec(t, src.DB, `UPDATE items SET name = NULL WHERE id = 3`)
	for _, m := range methods {
		o := verify.Options{Name: "items", Key: []string{"id"}, MaxSamples: 100, ChunkRows: m.chunk}
		res, err := verify.Compare(ctx, src, dst, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Missing != 2 || res.Extra != 3 || res.Changed != 4 || res.SourceRows != 1000 || res.TargetRows != 1001 {
			t.Fatalf("%s: tampered: %+v, want 2 missing, 3 extra, 4 changed (the _fence change ignored)", m.name, res)
		}
		if res.Method != m.name || res.Chunks != m.chunks || res.Narrowed != m.narrowed {
			t.Errorf("%s: method %s, %d chunks, %d narrowed; want %d, %d", m.name, res.Method, res.Chunks, res.Narrowed, m.chunks, m.narrowed)
		}
		want := map[string]string{"2": "price", "3": "name", "4": "at", "5": "doc"}
		for _, s := range res.Samples {
			if s.Kind == "changed" && (len(s.Columns) != 1 || s.Columns[0] != want[s.Key]) {
				t.Errorf("%s: changed row %s: columns %v, want [%s]", m.name, s.Key, s.Columns, want[s.Key])
			}
		}
	}
}

// BenchmarkVerify compares a verification of two equal tables, by chunk
// checksums and row by row, with two baselines in the same run: a raw scan
// of both tables (the same queries, values scanned and dropped), and both
// tables hashed whole in their own databases at once.
func BenchmarkVerify(b *testing.B) {
	const n = 200000
	src, dst := sides(b, n)
	names := []string{"id", "name", "price", "at", "doc"}
	q := dialect.Postgres{}.ScanOrdered([]string{"items"}, src.Columns, []string{"id"}, []bool{false}, false, false)
	rate := func(b *testing.B) { b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s") }
	b.Run("raw-scan-both", func(b *testing.B) {
		for b.Loop() {
			for _, db := range []*sql.DB{src.DB, dst.DB} {
				rows, err := db.QueryContext(context.Background(), q.SQL)
				if err != nil {
					b.Fatal(err)
				}
				vals := make([]any, len(names))
				ptrs := make([]any, len(names))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				for rows.Next() {
					if err := rows.Scan(ptrs...); err != nil {
						b.Fatal(err)
					}
				}
				rows.Close()
			}
		}
		rate(b)
	})
	b.Run("hash-both-in-db", func(b *testing.B) {
		for b.Loop() {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, db := range []*sql.DB{src.DB, dst.DB} {
				wg.Go(func() {
					var sum string
					errs[i] = db.QueryRow(`SELECT sum(hashtextextended(t::text, 0))::text FROM items t`).Scan(&sum)
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
		}
		rate(b)
	})
	for _, m := range []struct {
		name  string
		chunk int
	}{{"verify-checksum", 0}, {"verify-rows", -1}} {
		b.Run(m.name, func(b *testing.B) {
			for b.Loop() {
				res, err := verify.Compare(context.Background(), src, dst, verify.Options{Name: "items", Key: []string{"id"}, ChunkRows: m.chunk})
				if err != nil || !res.Equal() {
					b.Fatal(res, err)
				}
			}
			rate(b)
		})
	}
}
