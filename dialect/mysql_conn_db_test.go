package dialect_test

import (
	"testing"

	"github.com/migrate-dev/migrate/dialect"
)

// A copied row whose AUTO_INCREMENT key is 0 keeps 0, by the upsert and by
// LOAD DATA alike: sessions run with NO_AUTO_VALUE_ON_ZERO, so that 0 is
// not taken for "the next value".
func TestMySQL_AutoIncrementZeroKept(t *testing.T) {
	db, d := openMySQL(t)
	ctx := t.Context()
	execAll(t, db, "CREATE TABLE t (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, v varchar(10), _fence bigint NOT NULL DEFAULT 0)",
		"CREATE TABLE b (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, v varchar(10), _fence bigint NOT NULL DEFAULT 0)")
	var mode string
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	t.Logf("sql_mode %s", mode)

	st := d.Upsert([]string{"t"}, []string{"id", "v"}, []string{"id"}, "_fence", 2)
	if !st.Returns {
		var exist, newer int64
		if err := db.QueryRowContext(ctx, st.Probe, 1, 0, 5).Scan(&exist, &newer); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, st.SQL, 0, "zero", 1, 5, "five", 1); err != nil {
		t.Fatal(err)
	}

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cols := tableColumns(t, db, d, "b")
	if err := dialect.InsertNew(ctx, d.(dialect.BulkInserter), conn, []string{"b"}, cols, "_fence", 1, [][]any{{int64(0), "zero"}, {int64(5), "five"}}); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"t", "b"} {
		var zero string
		if err := db.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 0").Scan(&zero); err != nil || zero != "zero" {
			t.Errorf("%s: row 0 = %q, %v; want zero (sql_mode %s)", table, zero, err, mode)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil || n != 2 {
			t.Errorf("%s: %d rows, %v; want 2", table, n, err)
		}
	}
}
