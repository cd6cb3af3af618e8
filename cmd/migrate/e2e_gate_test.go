package main_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"
)

// gate stops a copy at a key, whatever the machine's speed, so that a test
// acts while the copy is certainly mid-run instead of polling for a moment
// that a fast copy or a slow poll can miss. A BEFORE INSERT trigger on the
// target table makes a row that meets stage i's condition (SQL on NEW, such
// as "NEW.id > 30000") wait on a lock the test holds — a PostgreSQL advisory
// lock, a MySQL user lock — until open(i). The copy writes up to the first
// such row and stays there, its batch waiting inside its transaction;
// waitHeld sees it wait. A condition on a batch boundary stops a batch at
// its first row: the waiting batch has written nothing. The target table
// must exist (with its trigger) before migrate copies into it.
//
// A waiting batch is still bounded by its lease (statement_timeout and
// lock_timeout in PostgreSQL): a test holds a gate for well under the
// plan's lease_ttl, or the batch is cut and retried smaller.
type gate struct {
	eng   *engine
	db    *sql.DB
	conn  *sql.Conn // holds the locks
	id    string    // in this gate's MySQL lock names
	locks []string  // MySQL lock names; PostgreSQL uses gateKey, i
	held  []bool
}

// gateKey is the first key of the gate's PostgreSQL advisory locks (the
// second is the stage); advisory locks belong to one database.
const gateKey = 7163

// newGate creates the trigger on table (in db, of engine eng) with one
// stage per condition, each held until opened.
func newGate(t *testing.T, eng *engine, db *sql.DB, table string, conds ...string) *gate {
	t.Helper()
	return newGateOn(t, eng, db, table, "INSERT", conds...)
}

// newGateOn is newGate on another event of table (UPDATE).
func newGateOn(t *testing.T, eng *engine, db *sql.DB, table, event string, conds ...string) *gate {
	t.Helper()
	ctx := t.Context()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	// MySQL lock names are server-wide: unique per gate, at most 64 characters.
	g := &gate{eng: eng, db: db, conn: conn, id: "migrate_gate_" + hex.EncodeToString(b[:]), held: make([]bool, len(conds))}
	var body strings.Builder
	for i, c := range conds {
		if eng == mysqlEngine {
			name := fmt.Sprintf("%s_%d", g.id, i)
			g.locks = append(g.locks, name)
			// GET_LOCK waits while the test holds the lock; each row lets go
			// at once, so that waiting sessions pass one after the other.
			fmt.Fprintf(&body, "IF %s THEN DO GET_LOCK('%s', 600); DO RELEASE_LOCK('%s'); END IF;\n", c, name, name)
			var ok int64
			if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&ok); err != nil || ok != 1 {
				t.Fatalf("GET_LOCK %s: %d, %v", name, ok, err)
			}
		} else {
			fmt.Fprintf(&body, "IF %s THEN PERFORM pg_advisory_xact_lock_shared(%d, %d); END IF;\n", c, gateKey, i)
			if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1, $2)", gateKey, i); err != nil {
				t.Fatal(err)
			}
		}
		g.held[i] = true
	}
	t.Cleanup(func() { g.openAll(t); _ = conn.Close() })
	q := eng.quote(table)
	if eng == mysqlEngine {
		exec1(t, db, "CREATE TRIGGER "+eng.quote(table+"_gate")+" BEFORE "+event+" ON "+q+" FOR EACH ROW BEGIN\n"+body.String()+"END")
	} else {
		exec1(t, db, "CREATE FUNCTION "+eng.quote(table+"_gate")+"() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n"+body.String()+"RETURN NEW;\nEND $$")
		exec1(t, db, "CREATE TRIGGER "+eng.quote(table+"_gate")+" BEFORE "+event+" ON "+q+" FOR EACH ROW EXECUTE FUNCTION "+eng.quote(table+"_gate")+"()")
	}
	return g
}

// waitingSQL selects the sessions waiting at the gate (not those waiting
// for migrate's setup lock, also an advisory or user lock): their
// connection ids in MySQL, their backend pids in PostgreSQL.
func (g *gate) waitingSQL() (string, []any) {
	if g.eng == mysqlEngine {
		// The trigger's statement shows as the session's; seeing other
		// users' sessions needs the PROCESS privilege, migrate's are the test's.
		return `SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND state = 'User lock' AND info LIKE ?`,
			[]any{"%" + g.id + "%"}
	}
	// The two-key form of the gate's locks: classid, objid, objsubid 2.
	return `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = $1 AND objsubid = 2
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, []any{gateKey}
}

// waiters lists the sessions waiting at the gate now.
func (g *gate) waiters(t *testing.T) []int64 {
	t.Helper()
	q, args := g.waitingSQL()
	rows, err := g.db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// waiting is how many sessions wait at the gate now.
func (g *gate) waiting(t *testing.T) int64 {
	t.Helper()
	return int64(len(g.waiters(t)))
}

// waitHeld waits until n sessions wait at the gate (one per shard that got
// there); it fails when p exits first.
func (g *gate) waitHeld(t *testing.T, p *proc, n int64) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for g.waiting(t) < n {
		select {
		case <-p.done:
			t.Fatalf("migrate exited before %d sessions waited at the gate:\n%s", n, p.wait(t))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions waiting at the gate after 90s, want %d\n%s", g.waiting(t), n, p.stderr.String())
		}
	}
}

// open lets stage i's rows through.
func (g *gate) open(t *testing.T, i int) {
	t.Helper()
	if !g.held[i] {
		return
	}
	g.held[i] = false
	ctx := context.WithoutCancel(t.Context())
	var err error
	if g.eng == mysqlEngine {
		_, err = g.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", g.locks[i])
	} else {
		_, err = g.conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1, $2)", gateKey, i)
	}
	if err != nil {
		t.Errorf("open stage %d of the gate: %v", i, err)
	}
}

// openAll lets every row through.
func (g *gate) openAll(t *testing.T) {
	t.Helper()
	for i := range g.held {
		g.open(t, i)
	}
}

// lost records that the server holding the gate's locks went away (a
// crash): the locks went with it, the gate is open from its restart on.
func (g *gate) lost() {
	for i := range g.held {
		g.held[i] = false
	}
	_ = g.conn.Close()
}

// drop ends the sessions waiting at the gate, as the server ends those of
// a SIGKILLed client: their transactions roll back. Without it a killed
// holder's batch would wait at the gate until it opens and only then find
// its client gone.
func (g *gate) drop(t *testing.T) {
	t.Helper()
	for _, id := range g.waiters(t) {
		// One gone meanwhile (ended by its own bound) is fine.
		if g.eng == mysqlEngine {
			_, _ = g.db.ExecContext(t.Context(), fmt.Sprintf("KILL %d", id))
		} else {
			_, _ = g.db.ExecContext(t.Context(), "SELECT pg_terminate_backend($1)", id)
		}
	}
	poll(t, 30*time.Second, "the sessions at the gate to end", func() bool { return g.waiting(t) == 0 })
}

// gateTable creates tb's target table in e's target (empty, its columns as
// in the source with the target engine's types; migrate adds the fence
// column) with a gate.
func (e *env) gateTable(t *testing.T, tb *table, conds ...string) *gate {
	t.Helper()
	e.createTarget(t, tb)
	return newGate(t, e.dst, e.dstDB, tb.name, conds...)
}

// createTarget creates tb's target table in e's target, empty, its columns
// as in the source with the target engine's types (migrate adds the fence
// column), as a test that needs it before the copy starts.
func (e *env) createTarget(t *testing.T, tb *table) {
	t.Helper()
	empty := *tb
	empty.rows = nil
	empty.create(t, e.dst, e.dstDB)
}

// gateBig is gateTable for seedBig's table "big".
func (e *env) gateBig(t *testing.T, conds ...string) *gate {
	t.Helper()
	return e.gateTable(t, bigSpec("big"), conds...)
}

// raise raises the watermark of plan's shard tbl#0 as a newer holder would
// (token + 1000, owner "intruder") while the holder's batch waits at the
// gate, and returns the rows done it read in the same transaction. The
// raise waits for that batch, which holds the watermark row since its fence
// check; the gate opens once the raise is seen waiting: the batch commits,
// the raise goes through, and no batch can commit after it.
func (g *gate) raise(t *testing.T, plan, tbl string) int64 {
	t.Helper()
	conn, err := g.db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	idQ, waitQ := `SELECT pg_backend_pid()`, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`
	// MariaDB refreshes INNODB_TRX only when it was not read for 100ms:
	// polled more often, it could show a stale state for ever.
	every := 20 * time.Millisecond
	if g.eng == mysqlEngine {
		idQ, waitQ = `SELECT CONNECTION_ID()`, `SELECT count(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'`
		every = 200 * time.Millisecond
	}
	var id int64
	if err := conn.QueryRowContext(t.Context(), idQ).Scan(&id); err != nil {
		t.Fatal(err)
	}
	type result struct {
		done int64
		err  error
	}
	raised := make(chan result, 1)
	go func() {
		var r result
		r.done, r.err = raiseOn(t.Context(), conn, g.eng, plan, tbl)
		raised <- r
	}()
	for deadline := time.Now().Add(60 * time.Second); queryInt(t, g.db, waitQ, id) != 1; {
		select {
		case r := <-raised:
			t.Fatalf("the raise did not wait for the holder's batch at the gate: %d rows done, %v", r.done, r.err)
		case <-time.After(every):
		}
		if time.Now().After(deadline) {
			t.Fatal("the raise was not seen waiting for the holder's batch within 60s")
		}
	}
	g.openAll(t)
	select {
	case r := <-raised:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.done
	case <-time.After(60 * time.Second):
		t.Fatal("the raise still waits 60s after the gate opened")
		return 0
	}
}

// raiseOn is raise's transaction, on conn.
func raiseOn(ctx context.Context, conn *sql.Conn, eng *engine, plan, tbl string) (int64, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE _migrate_fence SET token = token + 1000, owner = 'intruder'
WHERE plan = %s AND tbl = %s AND shard = 0`, eng.ph(1), eng.ph(2)), plan, tbl); err != nil {
		return 0, err
	}
	var done int64
	if err := tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT rows_done FROM _migrate_checkpoint
WHERE plan = %s AND tbl = %s AND shard = 0 FOR UPDATE`, eng.ph(1), eng.ph(2)), plan, tbl).Scan(&done); err != nil {
		return 0, err
	}
	return done, tx.Commit()
}
