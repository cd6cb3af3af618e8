package mystream

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/stream"
)

// source is a fresh database on the shared MariaDB with the project's pool.
type source struct {
	dsn    plans.DSN
	schema string
	pool   *sql.DB
}

func newSource(t testing.TB) source {
	t.Helper()
	u := testsvc.NewMySQLDB(t)
	dsn, err := plans.ParseDSN(u)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := dialect.MySQL{}.Open(dsn, dialect.Session{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	return source{dsn: dsn, schema: dsn.Database(), pool: pool}
}

func (s source) exec(t testing.TB, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.pool.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			_ = tx.Rollback()
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// row reads one row by a bound key through the project's pool (binary
// protocol), each value scanned into *any as the copy reads it.
func (s source) row(t testing.TB, table string, keys []string, args ...any) []any {
	t.Helper()
	where := make([]string, len(keys))
	for i, k := range keys {
		where[i] = dialect.MySQL{}.Quote(k) + " = ?"
	}
	rows, err := s.pool.QueryContext(context.Background(), "SELECT * FROM "+dialect.MySQL{}.Quote(table)+" WHERE "+strings.Join(where, " AND "), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	cols, _ := rows.Columns()
	if !rows.Next() {
		t.Fatalf("no row in %s for %v", table, args)
	}
	vals := make([]any, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := rows.Scan(dest...); err != nil {
		t.Fatal(err)
	}
	return vals
}

const manyDDL = "CREATE TABLE many (" +
	"id BIGINT AUTO_INCREMENT PRIMARY KEY, u INT UNSIGNED, tu TINYINT UNSIGNED, su SMALLINT UNSIGNED, mu MEDIUMINT UNSIGNED, bu BIGINT UNSIGNED, " +
	"mi MEDIUMINT, ti TINYINT, d DECIMAL(14,4), dz DECIMAL(5,0), v VARCHAR(100) CHARACTER SET utf8mb4, c CHAR(10) CHARACTER SET utf8mb4, bn BINARY(4), " +
	"b BLOB, tx TEXT, dt DATETIME(6), dt0 DATETIME, ts TIMESTAMP(3) NULL DEFAULT NULL, dd DATE, tm TIME, tm3 TIME(3), y YEAR, " +
	"e ENUM('small','medium','la''rge'), s SET('a','b','c'), j JSON, bt BIT(8), bt12 BIT(12), f FLOAT, db DOUBLE)"

const manyFull = "INSERT INTO many VALUES (NULL, 4294967295, 255, 65535, 16777215, 18446744073709551615, " +
	"-8388608, -128, -12345678.1234, 99999, 'héllo 😀 wörld', 'ab', x'6162', " +
	"x'00ff10', 'some text', '2024-02-29 13:14:15.123456', '1999-12-31 23:59:59', '2024-03-01 01:02:03.456', '2024-02-29', '-838:59:59', '12:34:56.700', 2024, " +
	"'la''rge', 'a,c', '{\"k\": [1, 2.5, \"x\"], \"n\": null}', b'10100101', b'101010101010', 1.5, 3.141592653589793)"

func tablesOf(schema string, names ...string) [][2]string {
	out := make([][2]string, len(names))
	for i, n := range names {
		out[i] = [2]string{schema, n}
	}
	return out
}

// nextTx is the next transaction with changes; the positions after other
// databases' transactions (change-less Txs: the server is shared with the
// other tests) are passed over.
func nextTx(t testing.TB, r stream.Reader) stream.Tx {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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

func open(t testing.TB, c *Capture, pos stream.Pos) stream.Reader {
	t.Helper()
	r, err := c.Open(context.Background(), pos)
	if err != nil {
		t.Fatalf("Open(%s): %v", pos, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func assertChange(t *testing.T, ch stream.Change, schema, table string, op stream.Op, old, new []any) {
	t.Helper()
	if ch.Schema != schema || ch.Table != table || ch.Op != op {
		t.Fatalf("change %s.%s %v, want %s.%s %v", ch.Schema, ch.Table, ch.Op, schema, table, op)
	}
	if !reflect.DeepEqual(ch.New, new) {
		for i := range ch.New {
			if i < len(new) && !reflect.DeepEqual(ch.New[i], new[i]) {
				t.Errorf("%s %s New[%s] = %#v (%T), SELECT read %#v (%T)", table, op, ch.Columns[i], ch.New[i], ch.New[i], new[i], new[i])
			}
		}
		t.Fatalf("%s %s New = %#v, want %#v", table, op, ch.New, new)
	}
	if !reflect.DeepEqual(ch.Old, old) {
		t.Fatalf("%s %s Old = %#v, want %#v", table, op, ch.Old, old)
	}
	if old != nil && !reflect.DeepEqual(ch.OldHas, allTrue(len(old))) {
		t.Fatalf("%s %s OldHas = %v, want all true", table, op, ch.OldHas)
	}
}

// gtidSeq is the sequence number of domain 0 in a MariaDB gtid position.
func gtidSeq(t testing.TB, p stream.Pos) uint64 {
	t.Helper()
	set, ok := strings.CutPrefix(string(p), "gtid:")
	if !ok {
		t.Fatalf("position %s is not a gtid one", p)
	}
	for _, g := range strings.Split(set, ",") {
		parts := strings.Split(g, "-")
		if len(parts) == 3 && parts[0] == "0" {
			n, err := strconv.ParseUint(parts[2], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("position %s has no domain 0", p)
	return 0
}

// TestCapture: every type's value equals what the pool reads, the changes
// of each transaction in one Tx in commit order, a key-changing update
// with its old key, tables not in the list skipped, and reopening from a
// transaction's End delivers what follows it.
func TestCapture(t *testing.T) {
	src := newSource(t)
	src.exec(t, manyDDL,
		"CREATE TABLE `MixedCase` (`Region` VARCHAR(10), `Num` INT, `Val` VARCHAR(20), PRIMARY KEY (`Region`, `Num`))",
		"CREATE TABLE other (id INT PRIMARY KEY, v INT)")
	ctx := context.Background()
	c := New(src.dsn, "capture", 0)
	t.Cleanup(func() { _ = c.Stop(ctx, false) })
	pos, err := c.Start(ctx, tablesOf(src.schema, "many", "MixedCase"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(pos), "gtid:") {
		t.Fatalf("Start on MariaDB = %s, want a gtid position", pos)
	}

	// tx1: several statements, one of them on a table not in the list.
	src.exec(t, manyFull, "INSERT INTO other VALUES (1, 1)", "INSERT INTO many (id) VALUES (2)")
	full1, null2 := src.row(t, "many", []string{"id"}, 1), src.row(t, "many", []string{"id"}, 2)
	// tx2: an update of every kind of column, and rows of the mixed-case table.
	src.exec(t, "UPDATE many SET u = 0, bu = 9223372036854775808, d = 0.0500, v = '', c = ' x ', bn = x'00', b = '', "+
		"dt = '1970-01-01 00:00:00', ts = '2038-01-19 03:14:07.999', dd = '1000-01-01', tm = '00:00:00', tm3 = '-00:00:01.5', y = 1901, "+
		"e = 'small', s = '', j = '[]', bt = b'0', bt12 = b'111111111111', f = -0.25, db = -1e300 WHERE id = 1",
		"INSERT INTO `MixedCase` VALUES ('eu', 1, 'one'), ('us', 2, 'two')")
	full1b := src.row(t, "many", []string{"id"}, 1)
	eu1, us2 := src.row(t, "MixedCase", []string{"Region", "Num"}, "eu", 1), src.row(t, "MixedCase", []string{"Region", "Num"}, "us", 2)
	// tx3: a key-changing update.
	src.exec(t, "UPDATE `MixedCase` SET `Region` = 'asia', `Val` = 'moved' WHERE `Region` = 'eu' AND `Num` = 1")
	asia1 := src.row(t, "MixedCase", []string{"Region", "Num"}, "asia", 1)
	// tx4: only a table not in the list: not delivered.
	src.exec(t, "UPDATE other SET v = 2")
	// tx5: a delete.
	src.exec(t, "DELETE FROM many WHERE id = 2")

	r := open(t, c, pos)
	tx1 := nextTx(t, r)
	if len(tx1.Changes) != 2 {
		t.Fatalf("tx1 has %d changes, want 2 (other's skipped): %+v", len(tx1.Changes), tx1.Changes)
	}
	assertChange(t, tx1.Changes[0], src.schema, "many", stream.Insert, nil, full1)
	assertChange(t, tx1.Changes[1], src.schema, "many", stream.Insert, nil, null2)
	if got := tx1.Changes[0].Columns; len(got) != 29 || got[0] != "id" || got[28] != "db" {
		t.Fatalf("columns %v", got)
	}
	tx2 := nextTx(t, r)
	if len(tx2.Changes) != 3 {
		t.Fatalf("tx2 has %d changes, want 3", len(tx2.Changes))
	}
	assertChange(t, tx2.Changes[0], src.schema, "many", stream.Update, full1, full1b)
	assertChange(t, tx2.Changes[1], src.schema, "MixedCase", stream.Insert, nil, eu1)
	assertChange(t, tx2.Changes[2], src.schema, "MixedCase", stream.Insert, nil, us2)
	tx3 := nextTx(t, r)
	if len(tx3.Changes) != 1 {
		t.Fatalf("tx3 has %d changes, want 1", len(tx3.Changes))
	}
	assertChange(t, tx3.Changes[0], src.schema, "MixedCase", stream.Update, eu1, asia1)
	tx5 := nextTx(t, r)
	if len(tx5.Changes) != 1 {
		t.Fatalf("tx5 has %d changes, want 1 (tx4 touched a table not in the list)", len(tx5.Changes))
	}
	assertChange(t, tx5.Changes[0], src.schema, "many", stream.Delete, null2, nil)

	seqs := []uint64{gtidSeq(t, pos)}
	for _, tx := range []stream.Tx{tx1, tx2, tx3, tx5} {
		seqs = append(seqs, gtidSeq(t, tx.End))
		if tx.Commit.IsZero() || time.Since(tx.Commit) > time.Hour || tx.Bytes <= 0 {
			t.Fatalf("tx ending %s: commit %v, bytes %d", tx.End, tx.Commit, tx.Bytes)
		}
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("End positions not increasing: %v", seqs)
		}
	}
	if seqs[4]-seqs[3] < 2 {
		t.Fatalf("tx4's GTID is not between tx3 and tx5: %v", seqs)
	}

	// Reopening from tx2's End delivers tx3 first.
	r2 := open(t, c, tx2.End)
	again := nextTx(t, r2)
	if again.End != tx3.End || !reflect.DeepEqual(again.Changes, tx3.Changes) {
		t.Fatalf("reopened at tx2's End: got the tx ending %s, want tx3 (%s)", again.End, tx3.End)
	}
	if got := nextTx(t, r2); got.End != tx5.End {
		t.Fatalf("then %s, want tx5 (%s)", got.End, tx5.End)
	}

	// Retained: the gtid position is readable.
	if _, ok, err := c.Retained(ctx, tx2.End); err != nil || !ok {
		t.Fatalf("Retained(%s) = %v, %v", tx2.End, ok, err)
	}
}

// TestFilePositions: a capture forced to file positions delivers the same
// transactions, with file:<binlog>:<offset> Ends, and reopening from one
// skips it, also across a binlog rotation.
func TestFilePositions(t *testing.T) {
	src := newSource(t)
	src.exec(t, "CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(10))")
	ctx := context.Background()
	c := New(src.dsn, "files", 0)
	c.FilePositions = true
	t.Cleanup(func() { _ = c.Stop(ctx, false) })
	pos, err := c.Start(ctx, tablesOf(src.schema, "k"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(pos), "file:") {
		t.Fatalf("Start = %s, want a file position", pos)
	}
	src.exec(t, "INSERT INTO k VALUES (1, 'a')")
	src.exec(t, "INSERT INTO k VALUES (2, 'b')", "UPDATE k SET v = 'c' WHERE id = 1")
	if _, err := src.pool.ExecContext(ctx, "FLUSH BINARY LOGS"); err != nil {
		t.Fatal(err)
	}
	src.exec(t, "DELETE FROM k WHERE id = 2")

	r := open(t, c, pos)
	var txs []stream.Tx
	for range 3 {
		txs = append(txs, nextTx(t, r))
	}
	if len(txs[0].Changes) != 1 || len(txs[1].Changes) != 2 || len(txs[2].Changes) != 1 || txs[2].Changes[0].Op != stream.Delete {
		t.Fatalf("transactions %+v", txs)
	}
	p0, _ := parsePos(pos)
	prev := p0
	for i, tx := range txs {
		p, err := parsePos(tx.End)
		if err != nil || p.file == "" {
			t.Fatalf("tx %d End %s: %v", i, tx.End, err)
		}
		if p.file == prev.file && p.off <= prev.off || p.file < prev.file {
			t.Fatalf("tx %d End %s not after %s", i, tx.End, filePos(prev.file, prev.off))
		}
		prev = p
	}
	if p1, _ := parsePos(txs[1].End); p1.file == prev.file {
		t.Fatalf("FLUSH BINARY LOGS did not rotate: %s then %s", txs[1].End, txs[2].End)
	}
	for i := range 2 {
		r2 := open(t, c, txs[i].End)
		if got := nextTx(t, r2); got.End != txs[i+1].End || !reflect.DeepEqual(got.Changes, txs[i+1].Changes) {
			t.Fatalf("reopened at %s: got %s, want %s", txs[i].End, got.End, txs[i+1].End)
		}
		_ = r2.Close()
	}
	bytes, ok, err := c.Retained(ctx, pos)
	if err != nil || !ok || bytes <= 0 {
		t.Fatalf("Retained(%s) = %d, %v, %v", pos, bytes, ok, err)
	}
	if _, ok, err := c.Retained(ctx, "file:no-such-binlog.000001:4"); err != nil || ok {
		t.Fatalf("Retained of a binlog not kept = %v, %v; want not ok", ok, err)
	}
	if _, err := c.Open(ctx, "file:no-such-binlog.000001:4"); !errors.Is(err, stream.ErrGone) {
		t.Fatalf("Open of a binlog not kept: %v, want ErrGone", err)
	}
}

// TestNextEnds: Next returns ctx's error when ctx ends, an error when the
// binlog connection is killed, and Behind reaches zero once caught up.
func TestNextEnds(t *testing.T) {
	src := newSource(t)
	src.exec(t, "CREATE TABLE k (id INT PRIMARY KEY)")
	ctx := context.Background()
	c := New(src.dsn, "ends", 0)
	c.HeartbeatPeriod = 100 * time.Millisecond
	t.Cleanup(func() { _ = c.Stop(ctx, false) })
	pos, err := c.Start(ctx, tablesOf(src.schema, "k"))
	if err != nil {
		t.Fatal(err)
	}
	src.exec(t, "INSERT INTO k VALUES (1)")
	r := open(t, c, pos)
	nextTx(t, r)

	// Caught up: a heartbeat with nothing pending.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("Behind never reached zero: %+v", r.Behind())
		}
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		tx, err := r.Next(short)
		cancel()
		if err == nil && len(tx.Changes) == 0 {
			continue // the position after other databases' transactions (the server is shared)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next with nothing to read: %v (%d changes), want the context's deadline", err, len(tx.Changes))
		}
		if lag := r.Behind(); lag.Seconds == 0 && lag.Bytes == 0 {
			break
		}
	}
	// Behind counts from the last event when one is pending.
	src.exec(t, "INSERT INTO k VALUES (2)")
	nextTx(t, r)
	if lag := r.Behind(); lag.Seconds < 0 || lag.Seconds > 3600 {
		t.Fatalf("Behind after a transaction: %+v", lag)
	}

	// The binlog connection killed: Next ends with an error, promptly.
	id := r.(*reader).syncer.LastConnectionID()
	if _, err := src.pool.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatUint(uint64(id), 10)); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = r.Next(wait)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next after the connection was killed: %v after %s", err, time.Since(start))
	}
	t.Logf("Next after KILL: %v (%s)", err, time.Since(start))
}
