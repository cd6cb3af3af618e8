package main_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
)

// TestPostLoad_SetupKeepsForeignKeyBeingCreated: an instance whose setup
// runs while another's post-load phase has re-created a foreign key but
// not yet marked its step done must leave that key in place. Setup used to
// read the step as not done and drop the key (for a load there was no
// longer any reason for): the holder then marked the step done, and the
// key was gone for good while every report said it was created. The
// holder is held between its DDL and its mark by a gate on the steps
// table's UPDATE to done.
func TestPostLoad_SetupKeepsForeignKeyBeingCreated(t *testing.T) {
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		e.lock, e.leaseTTL = "db", "60s" // a mark held at the gate is bounded by half the TTL
		int8 := e.src.types["bigint"]
		parent := "CREATE TABLE parent (id " + int8 + " PRIMARY KEY, name varchar(20) NOT NULL)"
		child := "CREATE TABLE child (id " + int8 + " PRIMARY KEY, parent_id " + int8 + " NOT NULL, CONSTRAINT child_parent_fk FOREIGN KEY (parent_id) REFERENCES parent (id))"
		for _, db := range []*sql.DB{e.srcDB, e.dstDB} {
			exec1(t, db, parent)
			exec1(t, db, child)
		}
		exec1(t, e.srcDB, "INSERT INTO parent VALUES (1, 'one'), (2, 'two')")
		exec1(t, e.srcDB, "INSERT INTO child VALUES (10, 1), (11, 2), (12, 2)")
		var d dialect.Dialect = dialect.Postgres{}
		if e.dst == mysqlEngine {
			d = dialect.MySQL{}
		}
		for _, q := range d.Helpers() { // the steps' table, for the gate
			exec1(t, e.dstDB, q)
		}
		g := newGateOn(t, e.dst, e.dstDB, dialect.PostLoadTable, "UPDATE",
			"NEW.state = 'done' AND NEW.kind = '"+dialect.StepForeignKey+"'")
		plan := e.plan(t, planTable{name: "parent"}, planTable{name: "child"})

		a := startMigrate(t, "run", "-p", plan, "--instance", "a")
		g.waitHeld(t, a, 1) // a created the key and waits to mark it done
		if n := e.foreignKeys(t, "child"); n != 1 {
			t.Fatalf("a holds the mark of a foreign key that is not there: %d on child", n)
		}
		c := startMigrate(t, "run", "-p", plan, "--instance", "c")
		waitUntil(t, c, "c, set up, waits as the post-load phase's standby", func() bool {
			return strings.Contains(c.stderr.String(), "the post-load phase is held by another instance")
		})
		g.open(t, 0)
		wantCode(t, a.wait(t), 0)
		rc := c.wait(t)
		wantCode(t, rc, 0)
		if strings.Contains(rc.stderr, "dropping a foreign key") {
			t.Errorf("c dropped a foreign key while a's post-load phase ran:\n%s", rc.stderr)
		}
		if n := e.foreignKeys(t, "child"); n != 1 {
			t.Fatalf("%d foreign keys on the target's child after both runs; want 1", n)
		}
		if n := queryInt(t, e.dstDB, "SELECT count(*) FROM "+dialect.PostLoadTable+" WHERE state <> 'done'"); n != 0 {
			t.Errorf("%d post-load steps not done", n)
		}
	})
}

// foreignKeys counts the foreign keys of a table in e's target.
func (e *env) foreignKeys(t *testing.T, table string) int64 {
	t.Helper()
	if e.dst == mysqlEngine {
		return queryInt(t, e.dstDB, `SELECT count(*) FROM information_schema.TABLE_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = ? AND CONSTRAINT_TYPE = 'FOREIGN KEY'`, table)
	}
	return queryInt(t, e.dstDB, `SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND conrelid = $1::regclass`, table)
}

// TestPostLoad_StepsRecordedWhileRunning: a table created in the source
// while a discovering plan's post-load phase runs is set up by the next
// instance, whose steps (its index) the running holder has not read. The
// holder must not mark the phase done over them: it leaves it pending,
// and the instance that copied the table runs them once its shards are
// done. It used to be marked done, and the index was never created.
func TestPostLoad_StepsRecordedWhileRunning(t *testing.T) {
	inDirections(t, []direction{pgToPG}, func(t *testing.T, e *env) {
		e.lock, e.leaseTTL = "db", "60s"
		exec1(t, e.srcDB, "CREATE TABLE parent (id bigint PRIMARY KEY, name varchar(20) NOT NULL)")
		exec1(t, e.srcDB, "CREATE TABLE child (id bigint PRIMARY KEY, parent_id bigint NOT NULL REFERENCES parent (id))")
		exec1(t, e.srcDB, "INSERT INTO parent VALUES (1, 'one'), (2, 'two')")
		exec1(t, e.srcDB, "INSERT INTO child VALUES (10, 1), (11, 2)")
		for _, q := range (dialect.Postgres{}).Helpers() {
			exec1(t, e.dstDB, q)
		}
		g := newGateOn(t, e.dst, e.dstDB, dialect.PostLoadTable, "UPDATE",
			"NEW.state = 'done' AND NEW.kind = '"+dialect.StepForeignKey+"'")
		plan := e.plan(t) // discovery: every table of the source

		a := startMigrate(t, "run", "-p", plan, "--instance", "a")
		g.waitHeld(t, a, 1) // a runs the post-load phase: it created the foreign key
		exec1(t, e.srcDB, "CREATE TABLE late (id bigint PRIMARY KEY, v integer NOT NULL)")
		exec1(t, e.srcDB, "CREATE INDEX late_v_idx ON late (v)")
		exec1(t, e.srcDB, "INSERT INTO late SELECT g, g % 7 FROM generate_series(1, 100) g")
		c := startMigrate(t, "run", "-p", plan, "--instance", "c")
		waitUntil(t, c, "c, which copied late, waits as the post-load phase's standby", func() bool {
			return strings.Contains(c.stderr.String(), "the post-load phase is held by another instance")
		})
		g.open(t, 0)
		wantCode(t, a.wait(t), 0)
		wantCode(t, c.wait(t), 0)
		if n := queryInt(t, e.dstDB, "SELECT count(*) FROM pg_indexes WHERE tablename = 'late' AND indexname = 'late_v_idx'"); n != 1 {
			t.Errorf("the index of the table added while the post-load phase ran: %d in the target, want 1", n)
		}
		if n := queryInt(t, e.dstDB, "SELECT count(*) FROM "+dialect.PostLoadTable+" WHERE state <> 'done'"); n != 0 {
			t.Errorf("%d post-load steps not done", n)
		}
		if n := e.foreignKeys(t, "child"); n != 1 {
			t.Errorf("%d foreign keys on child, want 1", n)
		}
	})
}
