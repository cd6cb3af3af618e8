package fence_test

import (
	"context"
	"database/sql"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
)

// TestBreak_HolderFrozenInCopy: a holder frozen in the middle of a
// batch's COPY (it sent one row and stopped) keeps the watermark row
// locked past its lease's deadline — PostgreSQL does not act on
// statement_timeout while it waits for COPY data — so a successor's
// claim waits for as long as the holder stays frozen. Break ends that
// session, and the claim then gets the row at once; the holder's batch
// fails.
func TestBreak_HolderFrozenInCopy(t *testing.T) {
	db, f := openPostgres(t)
	if _, err := db.Exec(`CREATE TABLE orders (id bigint PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if err := inTx(t, db, func(tx *sql.Tx) error { return f.Claim(t.Context(), tx, shard, 1, "holder") }); err != nil {
		t.Fatal(err)
	}
	l := newLease(t, 1, "holder")
	l.deadline = time.Now().Add(500 * time.Millisecond)
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	tx, tctx, end, err := fence.BeginOn(conn, dialect.Postgres{}, l)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	if err := f.CheckLease(tctx, tx, shard, l); err != nil {
		t.Fatal(err)
	}
	in, rows := io.Pipe()
	defer func() { _ = rows.Close() }()
	copied := make(chan error, 1)
	go func() {
		copied <- conn.Raw(func(dc any) error {
			_, err := dc.(*stdlib.Conn).Conn().PgConn().CopyFrom(context.Background(), in, `COPY orders (id) FROM STDIN`)
			return err
		})
	}()
	if _, err := rows.Write([]byte("1\n")); err != nil { // then the holder freezes
		t.Fatal(err)
	}
	time.Sleep(time.Until(l.deadline) + 200*time.Millisecond)

	claim := func(limit time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), limit)
		defer cancel()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if err := f.Claim(ctx, tx, shard, 2, "successor"); err != nil {
			return err
		}
		return tx.Commit()
	}
	if err := claim(time.Second); err == nil {
		t.Fatal("the successor claimed the row while the frozen holder's COPY held it: the premise of Break is gone")
	}
	n, err := f.Break(t.Context(), db, shard)
	if err != nil || n != 1 {
		t.Fatalf("Break = %d, %v; want the holder's one session ended", n, err)
	}
	start := time.Now()
	if err := claim(5 * time.Second); err != nil {
		t.Fatalf("the successor's claim after Break (%v): %v", time.Since(start), err)
	}
	t.Logf("the successor's claim took %v after Break", time.Since(start))
	select {
	case err := <-copied:
		if err == nil {
			t.Error("the frozen holder's COPY succeeded after its session was ended")
		}
	case <-time.After(5 * time.Second):
		t.Error("the frozen holder's COPY still runs")
	}
	if err := tx.Commit(); err == nil {
		t.Error("the frozen holder's transaction committed")
	}
	if got, owner, err := f.Watermark(t.Context(), db, shard); err != nil || got != 2 || owner != "successor" {
		t.Errorf("watermark = %d %q, %v; want 2 successor", got, owner, err)
	}
	// Nothing left to end: Break ends only sessions that hold the row.
	if n, err := f.Break(t.Context(), db, shard); err != nil || n != 0 {
		t.Errorf("Break again = %d, %v; want 0", n, err)
	}
	var other int
	if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&other); err != nil || other != 0 {
		t.Errorf("%d rows in the table, %v; want none of the frozen batch", other, err)
	}
}

// TestBreak_EndsOnlyTheTransactionSeen: a session listed as holding the
// row is ended only while it still runs the transaction it held the row
// in. One that committed and began another meanwhile (the holder's next
// batch, or another session that got its pid) is left alone.
func TestBreak_EndsOnlyTheTransactionSeen(t *testing.T) {
	db, f := openPostgres(t)
	if err := inTx(t, db, func(tx *sql.Tx) error { return f.Claim(t.Context(), tx, shard, 1, "holder") }); err != nil {
		t.Fatal(err)
	}
	l := newLease(t, 1, "holder")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	hold := func() (*sql.Tx, string) {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.CheckLease(ctx, tx, shard, l); err != nil {
			t.Fatal(err)
		}
		var xact string
		if err := tx.QueryRow(`SELECT pg_current_xact_id()::text`).Scan(&xact); err != nil {
			t.Fatal(err)
		}
		return tx, xact
	}
	tx, xact := hold()
	holders, err := f.Holders(ctx, db, shard)
	if err != nil || len(holders) != 1 || holders[0].Xact != xact {
		t.Fatalf("Holders = %+v, %v; want one, in transaction %s", holders, err, xact)
	}
	// The holder finishes that transaction and begins another before the
	// successor's End.
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	next, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.Exec(`SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	if ended, err := f.End(ctx, db, holders[0]); err != nil || ended {
		t.Fatalf("End of a holder that finished the transaction it was seen in = %v, %v; want false", ended, err)
	}
	if err := next.Commit(); err != nil {
		t.Fatalf("the session's next transaction: %v; want it untouched", err)
	}

	// Still in the transaction it was seen in: ended.
	tx, xact = hold()
	defer func() { _ = tx.Rollback() }()
	holders, err = f.Holders(ctx, db, shard)
	if err != nil || len(holders) != 1 || holders[0].Xact != xact {
		t.Fatalf("Holders = %+v, %v; want one, in transaction %s", holders, err, xact)
	}
	if ended, err := f.End(ctx, db, holders[0]); err != nil || !ended {
		t.Fatalf("End of a holder still in its transaction = %v, %v; want true", ended, err)
	}
	if err := tx.Commit(); err == nil {
		t.Error("the ended holder's transaction committed")
	}
}
