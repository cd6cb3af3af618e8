package pgstream

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/stream"
)

// testStatus is the status update interval of the tests' readers, so that
// acknowledgements reach the server quickly; tests poll with a deadline.
const testStatus = 200 * time.Millisecond

type env struct {
	t   testing.TB
	dsn plans.DSN
	db  *sql.DB // the project's own pool
	c   *Capture
}

// newEnv gives a fresh database, the project's pool to it and a capture
// whose slot and publication are dropped when the test ends.
func newEnv(t testing.TB) *env {
	t.Helper()
	u := testsvc.NewPostgresDB(t)
	dsn, err := plans.ParseDSN(u)
	if err != nil {
		t.Fatal(err)
	}
	db, err := dialect.Postgres{}.Open(dsn, dialect.Session{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c := New(dsn, testsvc.Prefix(t))
	c.status = testStatus
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx, false); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return &env{t: t, dsn: dsn, db: db, c: c}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) exec(sqls ...string) {
	e.t.Helper()
	for _, s := range sqls {
		if _, err := e.db.Exec(s); err != nil {
			e.t.Fatalf("%s: %v", s, err)
		}
	}
}

func (e *env) start(tables ...[2]string) stream.Pos {
	e.t.Helper()
	pos, err := e.c.Start(ctxT(e.t), tables)
	if err != nil {
		e.t.Fatal(err)
	}
	return pos
}

func (e *env) open(pos stream.Pos) *Reader {
	e.t.Helper()
	r, err := e.c.Open(ctxT(e.t), pos)
	if err != nil {
		e.t.Fatal(err)
	}
	t := e.t
	t.Cleanup(func() { _ = r.Close() })
	return r.(*Reader)
}

// next reads one transaction with changes (passing over the positions an
// idle stream delivers), failing the test after a deadline.
func next(t testing.TB, r stream.Reader) stream.Tx {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		tx, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(tx.Changes) > 0 {
			return tx
		}
	}
}

// nextErr reads until Next fails (passing over transactions without
// changes) and returns its error, or a transaction with changes as an
// error.
func nextErr(ctx context.Context, r stream.Reader) error {
	for {
		tx, err := r.Next(ctx)
		if err != nil {
			return err
		}
		if len(tx.Changes) > 0 {
			return fmt.Errorf("a transaction with %d changes ending at %s", len(tx.Changes), tx.End)
		}
	}
}

// row reads a row through the project's pool, scanning into *any the way
// the copy does.
func (e *env) row(query string, args ...any) []any {
	e.t.Helper()
	rows, err := e.db.Query(query, args...)
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		e.t.Fatalf("%s %v: no row (%v)", query, args, rows.Err())
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		e.t.Fatal(err)
	}
	return vals
}

// scalar reads one value.
func (e *env) scalar(query string, args ...any) any {
	e.t.Helper()
	return e.row(query, args...)[0]
}

// eventually polls cond until it holds, failing after a deadline.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// sameRow compares a change's row with a row read by SELECT, column by
// column, reporting each difference with its types.
func sameRow(t testing.TB, cols []string, got, want []any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("row has %d values, SELECT %d", len(got), len(want))
	}
	var diffs []string
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) && !bothNaN(got[i], want[i]) {
			diffs = append(diffs, cols[i]+": change "+show(got[i])+", select "+show(want[i]))
		}
	}
	if diffs != nil {
		t.Errorf("values differ:\n  %s", strings.Join(diffs, "\n  "))
	}
}

func show(v any) string {
	if tm, ok := v.(time.Time); ok {
		return tm.String() + " loc=" + tm.Location().String() + " (time.Time)"
	}
	return reflect.TypeOf(v).String() + " " + strings.TrimSpace(strings.ReplaceAll(fmtV(v), "\n", " "))
}

// bothNaN: NaN is the same value on both sides, though not equal to itself.
func bothNaN(a, b any) bool {
	x, ok1 := a.(float64)
	y, ok2 := b.(float64)
	return ok1 && ok2 && math.IsNaN(x) && math.IsNaN(y)
}
