package dialect_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
)

// F2: the upsert overwrites a row only when the stored token is <= the
// incoming one, and reports inserted and updated rows.
func TestPostgres_UpsertFenced(t *testing.T) {
	db := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id bigint PRIMARY KEY, v text, _fence bigint NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	d := dialect.Postgres{}
	upsert := func(tok int64, rows ...[]any) (ins, upd int64) {
		t.Helper()
		st := d.Upsert([]string{"t"}, []string{"id", "v"}, []string{"id"}, "_fence", len(rows))
		var args []any
		for _, r := range rows {
			args = append(args, r...)
		}
		args = append(args, tok)
		if err := db.QueryRowContext(ctx, st.SQL, args...).Scan(&ins, &upd); err != nil {
			t.Fatal(err)
		}
		return ins, upd
	}
	value := func(id int64) (v string, tok int64) {
		t.Helper()
		if err := db.QueryRowContext(ctx, `SELECT v, _fence FROM t WHERE id = $1`, id).Scan(&v, &tok); err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		return v, tok
	}
	if ins, upd := upsert(5, []any{1, "five"}, []any{2, "five"}); ins != 2 || upd != 0 {
		t.Fatalf("first write: inserted %d updated %d, want 2 0", ins, upd)
	}
	t.Run("lower token never overwrites", func(t *testing.T) {
		if ins, upd := upsert(4, []any{1, "four"}); ins != 0 || upd != 0 {
			t.Errorf("inserted %d updated %d, want 0 0", ins, upd)
		}
		if v, tok := value(1); v != "five" || tok != 5 {
			t.Errorf("row 1 = %q token %d, want five 5", v, tok)
		}
	})
	t.Run("equal token rewrites (a retried batch)", func(t *testing.T) {
		if ins, upd := upsert(5, []any{1, "five again"}); ins != 0 || upd != 1 {
			t.Errorf("inserted %d updated %d, want 0 1", ins, upd)
		}
	})
	t.Run("higher token overwrites and counts as replayed", func(t *testing.T) {
		if ins, upd := upsert(6, []any{2, "six"}, []any{3, "six"}); ins != 1 || upd != 1 {
			t.Errorf("inserted %d updated %d, want 1 1", ins, upd)
		}
		if v, tok := value(2); v != "six" || tok != 6 {
			t.Errorf("row 2 = %q token %d, want six 6", v, tok)
		}
	})
}

// BoundTx makes the server itself abort a transaction whose client went
// silent, with no help from the client (a frozen process): the row it locked
// is free once the bound passes.
func TestPostgres_BoundTx(t *testing.T) {
	db := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE w (id int PRIMARY KEY, v int); INSERT INTO w VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	frozen, err := db.BeginTx(context.Background(), nil) // no client-side deadline
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = frozen.Rollback() }()
	q, args := dialect.Postgres{}.BoundTx(500 * time.Millisecond)
	if _, err := frozen.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
	if _, err := frozen.Exec(`UPDATE w SET v = 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := db.ExecContext(ctx, `UPDATE w SET v = 2 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 1500*time.Millisecond {
		t.Errorf("the second writer waited %v; the server should have aborted the silent transaction after 500ms", waited)
	}
	if err := frozen.Commit(); err == nil {
		t.Error("the silent transaction committed after its bound")
	}
}
