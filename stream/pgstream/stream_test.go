package pgstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/migrate-dev/migrate/stream"
)

func lsn(t testing.TB, p stream.Pos) pglogrepl.LSN {
	t.Helper()
	l, err := pglogrepl.ParseLSN(string(p))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// confirmed is the slot's confirmed_flush_lsn.
func (e *env) confirmed() pglogrepl.LSN {
	e.t.Helper()
	s, _ := e.scalar(`SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, e.c.Slot()).(string)
	l, err := pglogrepl.ParseLSN(s)
	if err != nil {
		e.t.Fatalf("confirmed_flush_lsn %q: %v", s, err)
	}
	return l
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestToastAndKeyChange: a large (toasted) value not changed by an update
// arrives as Unchanged with a nil value; an update that changes the key
// carries the old key in Old, and only the key.
func TestToastAndKeyChange(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE docs (id int PRIMARY KEY, n int, body text)`)
	r := e.open(e.start([2]string{"public", "docs"}))
	big := randomHex(40000) // incompressible enough to be stored out of line
	if _, err := e.db.Exec(`INSERT INTO docs VALUES (1, 0, $1)`, big); err != nil {
		t.Fatal(err)
	}
	e.exec(`UPDATE docs SET n = 1 WHERE id = 1`, `UPDATE docs SET id = 2, n = 2 WHERE id = 1`)

	ins := next(t, r).Changes[0]
	if ins.Op != stream.Insert || ins.New[2] != big || ins.Unchanged != nil {
		t.Fatalf("insert: %s, body of %d bytes, Unchanged %v", ins.Op, len(fmt.Sprint(ins.New[2])), ins.Unchanged)
	}
	up := next(t, r).Changes[0]
	if up.Op != stream.Update || up.Unchanged == nil || !up.Unchanged[2] || up.Unchanged[0] || up.Unchanged[1] || up.New[2] != nil {
		t.Fatalf("update: Unchanged %v, body %v; want body unchanged and nil", up.Unchanged, up.New[2] != nil)
	}
	if up.New[0] != int64(1) || up.New[1] != int64(1) {
		t.Fatalf("update: New %v", up.New[:2])
	}
	if up.Old[0] != int64(1) || !up.OldHas[0] || up.OldHas[1] || up.OldHas[2] {
		t.Fatalf("update keeping its key: Old %v OldHas %v, want the key 1 only", up.Old, up.OldHas)
	}
	mv := next(t, r).Changes[0]
	if mv.New[0] != int64(2) || mv.Old[0] != int64(1) || !mv.OldHas[0] || mv.OldHas[1] || mv.OldHas[2] || mv.Old[1] != nil {
		t.Fatalf("key change: New %v Old %v OldHas %v; want Old with the old key 1 only", mv.New[:2], mv.Old, mv.OldHas)
	}
}

// TestOrderAndResume: transactions arrive in commit order with increasing
// End; opening from a transaction's End skips it and delivers the rest,
// also when the slot resends from before.
func TestOrderAndResume(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE seq (id int PRIMARY KEY)`, `CREATE TABLE other (id int)`)
	start := e.start([2]string{"public", "seq"})
	for i := 1; i <= 5; i++ {
		e.exec(fmt.Sprintf(`INSERT INTO seq VALUES (%d)`, i), `INSERT INTO other VALUES (1)`) // other: not published
	}
	r := e.open(start)
	var txs []stream.Tx
	prev := lsn(t, start)
	for i := 1; i <= 5; i++ {
		tx := next(t, r)
		if len(tx.Changes) != 1 || tx.Changes[0].New[0] != int64(i) {
			t.Fatalf("tx %d: %+v", i, tx.Changes)
		}
		if end := lsn(t, tx.End); end <= prev {
			t.Fatalf("tx %d ends at %s, not after %s", i, end, prev)
		} else {
			prev = end
		}
		txs = append(txs, tx)
	}
	eventually(t, "Behind to report nothing left", func() bool {
		// the positions an idle stream delivers are read as they come
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := nextErr(ctx, r); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("after the 5 transactions: %v", err)
		}
		return r.Behind() == stream.Lag{}
	})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := e.open(txs[1].End)
	// Three transactions wait for Next: the lag is the WAL after tx 2.
	eventually(t, "Behind to count the WAL after tx 2", func() bool { return r2.Behind().Bytes > 0 })
	if l := r2.Behind(); l.Seconds != 0 {
		t.Fatalf("Behind before any Next: %+v, want no age", l)
	}
	for i := 3; i <= 5; i++ {
		if i == 4 {
			// Once the reader has received the two left (under load the
			// server may send them a while after tx 3).
			eventually(t, "Behind with two transactions waiting to show bytes and the age of tx 3", func() bool {
				l := r2.Behind()
				return l.Bytes > 0 && l.Seconds > 0
			})
		}
		if tx := next(t, r2); tx.End != txs[i-1].End || tx.Changes[0].New[0] != int64(i) {
			t.Fatalf("after reopening from tx 2: got tx ending %s with %v, want tx %d ending %s", tx.End, tx.Changes[0].New, i, txs[i-1].End)
		}
	}
}

// TestAckReconnect: status updates carry the acknowledged position only,
// and after Close the slot's confirmed_flush_lsn reaches the last Ack;
// opening again from there delivers the next transaction first.
func TestAckReconnect(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	r := e.open(e.start([2]string{"public", "t"}))
	e.exec(`INSERT INTO t VALUES (1)`, `INSERT INTO t VALUES (2)`, `INSERT INTO t VALUES (3)`)
	tx1, tx2, tx3 := next(t, r), next(t, r), next(t, r)

	r.Ack(tx1.End)
	eventually(t, "confirmed_flush_lsn to reach tx 1's end", func() bool { return e.confirmed() >= lsn(t, tx1.End) })
	if c := e.confirmed(); c >= lsn(t, tx2.End) {
		t.Fatalf("confirmed_flush_lsn %s is past tx 2's end %s, which was received but never acknowledged", c, tx2.End)
	}

	r.Ack(tx2.End)
	r.Ack(tx1.End) // an older position does not move it back
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "confirmed_flush_lsn to reach tx 2's end after Close", func() bool { return e.confirmed() >= lsn(t, tx2.End) })
	if c := e.confirmed(); c >= lsn(t, tx3.End) {
		t.Fatalf("confirmed_flush_lsn %s is past tx 3's end %s", c, tx3.End)
	}
	r2 := e.open(tx2.End)
	if tx := next(t, r2); tx.End != tx3.End || tx.Changes[0].New[0] != int64(3) {
		t.Fatalf("after reopening: tx ending %s with %v, want tx 3", tx.End, tx.Changes[0].New)
	}
	// Waiting on an idle stream ends with the context, and the reader
	// still delivers afterwards.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := nextErr(ctx, r2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an idle stream: %v, want the context's error", err)
	}
	e.exec(`INSERT INTO t VALUES (4)`)
	if tx := next(t, r2); tx.Changes[0].New[0] != int64(4) {
		t.Fatalf("after a timed-out Next: %v, want row 4", tx.Changes[0].New)
	}
}

// TestIdleKeepaliveAck: on a stream where everything delivered is
// acknowledged, keepalives advance confirmed_flush_lsn past WAL holding
// nothing for it; while a delivered transaction is not acknowledged, they
// do not.
func TestIdleKeepaliveAck(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`, `CREATE TABLE other (id int)`)
	r := e.open(e.start([2]string{"public", "t"}))
	e.exec(`INSERT INTO t VALUES (1)`)
	tx := next(t, r)
	e.exec(`INSERT INTO other VALUES (1)`)
	after := lsn(t, stream.Pos(e.scalar(`SELECT pg_current_wal_insert_lsn()::text`).(string)))
	if after <= lsn(t, tx.End) {
		t.Fatalf("WAL end %s not after the tx's end %s", after, tx.End)
	}
	// Past the unpublished insert the stream delivers its position as a
	// transaction without changes; not acknowledged, the slot stays
	// before the delivered transaction's end.
	var idle stream.Tx
	eventually(t, "a position past the unpublished insert", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		tx, err := r.Next(ctx)
		if err == nil && len(tx.Changes) > 0 {
			t.Fatalf("a transaction with changes from an unpublished table: %+v", tx)
		}
		if err == nil {
			idle = tx
		}
		return idle.End != "" && lsn(t, idle.End) >= after
	})
	// Behind is 0 once the idle positions delivered are read (the shared
	// server's other databases may move the WAL end on meanwhile).
	eventually(t, "Behind 0 after the idle positions were read", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if tx, err := r.Next(ctx); err == nil {
			if len(tx.Changes) > 0 {
				t.Fatalf("a transaction with changes from an unpublished table: %+v", tx)
			}
			idle = tx
		}
		return r.Behind().Bytes == 0
	})
	if c := e.confirmed(); c >= lsn(t, tx.End) {
		t.Fatalf("confirmed_flush_lsn %s reached the unacknowledged tx's end %s", c, tx.End)
	}
	r.Ack(idle.End)
	eventually(t, "the acknowledged idle position confirmed", func() bool { return e.confirmed() >= after })
}

// TestStartTwice: a second Start returns a usable position (the slot's
// confirmed one) and sets the publication's tables to exactly the new ones.
func TestStartTwice(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY)`, `CREATE TABLE b (id int PRIMARY KEY)`)
	p1 := e.start([2]string{"public", "a"})
	p2 := e.start([2]string{"public", "b"})
	if p1 != p2 {
		t.Fatalf("second Start: %s, want the first's %s", p2, p1)
	}
	if n := e.scalar(`SELECT count(*) FROM pg_publication_tables WHERE pubname = $1 AND tablename = 'b'`, e.c.Publication()); n != int64(1) {
		t.Fatalf("publication tables: b counted %v", n)
	}
	if n := e.scalar(`SELECT count(*) FROM pg_publication_tables WHERE pubname = $1`, e.c.Publication()); n != int64(1) {
		t.Fatalf("publication has %v tables, want b only", n)
	}
	r := e.open(p2)
	e.exec(`INSERT INTO a VALUES (1)`, `INSERT INTO b VALUES (2)`)
	if tx := next(t, r); tx.Changes[0].Table != "b" {
		t.Fatalf("got a change of %s, want b's", tx.Changes[0].Table)
	}
}

// TestStartConcurrent: Starts of several instances at once, while a
// transaction at the source keeps the slot's creation waiting, all return
// the slot's one consistent point.
func TestStartConcurrent(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY)`)
	ctx := ctxT(t)
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN; INSERT INTO a VALUES (0)`); err != nil {
		t.Fatal(err)
	}
	const n = 4
	type res struct {
		pos stream.Pos
		err error
	}
	out := make(chan res, n)
	for range n {
		go func() {
			pos, err := e.c.Start(ctx, [][2]string{{"public", "a"}})
			out <- res{pos, err}
		}()
	}
	// The slot exists and is being created (waiting for the transaction
	// above) before it ends.
	for e.scalar(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, e.c.Slot()) != int64(1) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the others' Starts meet the slot in creation
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	var first stream.Pos
	for i := range n {
		r := <-out
		if r.err != nil {
			t.Fatalf("Start %d: %v", i, r.err)
		}
		if first == "" {
			first = r.pos
		} else if r.pos != first {
			t.Fatalf("Start returned %s and %s", first, r.pos)
		}
	}
}

// TestTruncate: a TRUNCATE of a published table fails Next, naming it.
func TestTruncate(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE "Trunc" (id int PRIMARY KEY)`)
	r := e.open(e.start([2]string{"public", "Trunc"}))
	e.exec(`INSERT INTO "Trunc" VALUES (1)`, `TRUNCATE "Trunc"`)
	next(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := r.Next(ctx)
	if err == nil || !strings.Contains(err.Error(), "TRUNCATE of public.Trunc is not supported") {
		t.Fatalf("Next after TRUNCATE: %v", err)
	}
	if _, err2 := r.Next(ctx); err2 != err {
		t.Fatalf("Next again: %v, want the same error", err2)
	}
}

// TestStopDropsAndEndsReader: Stop ends the walsender of an open reader,
// whose Next then fails promptly, and drops the slot and the publication;
// Stop again is no error; Retained then reports the slot gone, and Open
// fails with ErrGone.
func TestStopDropsAndEndsReader(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	pos := e.start([2]string{"public", "t"})
	r := e.open(pos)
	if b, ok, err := e.c.Retained(ctxT(t), pos); err != nil || !ok || b < 0 {
		t.Fatalf("Retained: %d %v %v", b, ok, err)
	}
	if err := e.c.Stop(ctxT(t), true); err != nil {
		t.Fatal(err)
	}
	if n := e.scalar(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, e.c.Slot()); n != int64(1) {
		t.Fatalf("Stop(keepSlot): %v slots", n)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- nextErr(ctx, r)
	}()
	if err := e.c.Stop(ctxT(t), false); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next after the walsender ended: %v, want the connection's error", err)
	}
	if n := e.scalar(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, e.c.Slot()); n != int64(0) {
		t.Fatalf("slot still there after Stop")
	}
	if n := e.scalar(`SELECT count(*) FROM pg_publication WHERE pubname = $1`, e.c.Publication()); n != int64(0) {
		t.Fatalf("publication still there after Stop")
	}
	if err := e.c.Stop(ctxT(t), false); err != nil {
		t.Fatalf("Stop again: %v", err)
	}
	if _, ok, err := e.c.Retained(ctxT(t), pos); err != nil || ok {
		t.Fatalf("Retained after Stop: ok %v, err %v", ok, err)
	}
	if _, err := e.c.Open(ctxT(t), pos); !errors.Is(err, stream.ErrGone) {
		t.Fatalf("Open after Stop: %v, want ErrGone", err)
	}
}

func TestObjectName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"orders", "migrate_orders"},
		{"a_1", "migrate_a_1"},
	} {
		if got := objectName(tc.in); got != tc.want {
			t.Errorf("objectName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	seen := map[string]string{}
	for _, in := range []string{"Orders", "orders!", "orders?", "ORDERS", strings.Repeat("x", 100), strings.Repeat("x", 101), "plan-ü"} {
		got := objectName(in)
		if len(got) > maxIdent || !strings.HasPrefix(got, "migrate_") || strings.Trim(got, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			t.Errorf("objectName(%q) = %q: not a short lower-case name", in, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("objectName(%q) = objectName(%q) = %q", in, other, got)
		}
		seen[got] = in
	}
}

// TestCurrentCoversAsyncCommits: a transaction committed with
// synchronous_commit off, whose WAL the server may not have written yet,
// lies before Current: a cutover that waits for the stream to reach
// Current waits for it.
func TestCurrentCoversAsyncCommits(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v text)`)
	r := e.open(e.start([2]string{"public", "a"}))
	for i := range 20 {
		e.exec(fmt.Sprintf(`BEGIN; SET LOCAL synchronous_commit = off; INSERT INTO a VALUES (%d, repeat('x', 2000)); COMMIT`, i))
		pos, err := e.c.Current(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		tx := next(t, r)
		if ok, err := e.c.Covers(pos, tx.End); err != nil || !ok {
			t.Fatalf("commit %d: Current %s does not cover the transaction committed before it (end %s)", i, pos, tx.End)
		}
		r.Ack(tx.End)
	}
}

// TestOpenTakesSlot: Open of a slot another reader holds (an instance
// frozen while it applied the stream) ends that reader and reads on.
func TestOpenTakesSlot(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY)`)
	pos := e.start([2]string{"public", "a"})
	old := e.open(pos)
	e.exec(`INSERT INTO a VALUES (1)`)
	next(t, old)
	r := e.open(pos)
	e.exec(`INSERT INTO a VALUES (2)`)
	if tx := next(t, r); fmt.Sprint(tx.Changes[0].New[0]) != "1" {
		t.Fatalf("the new reader read %v first, want the change after pos (id 1)", tx.Changes[0].New)
	}
	if err := nextErr(ctxT(t), old); err == nil {
		t.Fatal("the old reader reads on after its slot was taken")
	}
}

// TestCurrentReachedAfterAsyncCommits: a transaction committed with
// synchronous_commit off returns before its WAL is written, when
// pg_current_wal_lsn() can still be behind its commit; Current must be at
// or past it, and the stream must then reach Current with the transaction
// delivered (a cutover stopping at Current applies every change committed
// before it).
func TestCurrentReachedAfterAsyncCommits(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	r := e.open(e.start([2]string{"public", "t"}))
	ctx := ctxT(t)
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SET synchronous_commit = off`); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		var end string
		if _, err := conn.ExecContext(ctx, `INSERT INTO t VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRowContext(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&end); err != nil {
			t.Fatal(err)
		}
		cur, err := e.c.Current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := e.c.Covers(cur, stream.Pos(end)); err != nil || !ok {
			t.Fatalf("insert %d: Current %s is before the end of its asynchronous commit %s (%v)", i, cur, end, err)
		}
	}
	cur, err := e.c.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	eventually(t, "the stream at Current", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		tx, err := r.Next(ctx)
		if err != nil {
			return false
		}
		seen += len(tx.Changes)
		ok, _ := e.c.Covers(tx.End, cur)
		return ok
	})
	if seen != n {
		t.Errorf("%d inserts delivered by the time the stream reached Current %s, want %d", seen, cur, n)
	}
}
