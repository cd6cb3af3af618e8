package fence_test

import (
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// A bounded transaction on MySQL sets the session's timeouts (MySQL has no
// transaction-local ones); once it has ended, the pooled connection is back
// to the session's own values, so later statements do not inherit a lock
// wait of a second or an idle kill (issue 12, item 8).
func TestBegin_MySQLSessionRestored(t *testing.T) {
	dsn, err := plans.ParseDSN(testsvc.NewMySQLDB(t))
	if err != nil {
		t.Fatal(err)
	}
	db, d, err := dialect.Open(t.Context(), dialect.MySQL{}, dsn, dialect.SessionFor(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1) // every statement below runs on the one connection
	const vars = "SELECT @@SESSION.wait_timeout, @@SESSION.innodb_lock_wait_timeout, @@SESSION.net_read_timeout, @@SESSION.net_write_timeout"
	var before [4]int64
	if err := db.QueryRow(vars).Scan(&before[0], &before[1], &before[2], &before[3]); err != nil {
		t.Fatal(err)
	}
	// SessionFor(30s): idle 10s, lock waits 15s.
	if before[0] != 10 || before[1] != 15 {
		t.Fatalf("session values %v, want wait_timeout 10, innodb_lock_wait_timeout 15", before)
	}
	l := newLease(t, 1, "holder")
	l.deadline = time.Now().Add(2500 * time.Millisecond)
	for _, commit := range []bool{true, false} {
		tx, ctx, done, err := fence.Begin(db, d, l)
		if err != nil {
			t.Fatal(err)
		}
		var in [4]int64
		if err := tx.QueryRowContext(ctx, vars).Scan(&in[0], &in[1], &in[2], &in[3]); err != nil {
			t.Fatal(err)
		}
		if in != [4]int64{2, 2, 2, 2} { // net_read/net_write_timeout too: a holder frozen inside LOAD DATA (item 5)
			t.Errorf("inside the bounded transaction: %v, want every bound at 2s", in)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		done()
		var after [4]int64
		if err := db.QueryRow(vars).Scan(&after[0], &after[1], &after[2], &after[3]); err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Errorf("after the bounded transaction (commit %v) the pooled connection has %v, want the session's %v", commit, after, before)
		}
	}
}
