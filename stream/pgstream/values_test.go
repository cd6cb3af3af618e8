package pgstream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/stream"
)

func fmtV(v any) string { return fmt.Sprintf("%#v", v) }

const orderLines = `CREATE TYPE "Mood" AS ENUM ('sad', 'happy');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE TABLE "OrderLines" (
  "OrderId" int NOT NULL,
  line bigint GENERATED ALWAYS AS IDENTITY,
  small smallint,
  amount numeric(12,3),
  big_n numeric,
  note text,
  code varchar(10),
  letter char(3),
  blob bytea,
  ok bool,
  day date,
  at timestamp,
  attz timestamptz,
  tm time,
  id uuid,
  doc jsonb,
  js json,
  feeling "Mood",
  tags text[],
  nums int[],
  ratio float8,
  ratio4 real,
  span interval,
  qty posint,
  addr inet,
  PRIMARY KEY ("OrderId", line))`

// TestValuesEqualSelect: every change's New equals the row SELECT reads
// through the project's pool, for many types, through inserts, updates and
// deletes in several transactions, with a mixed-case table and a composite
// key.
//
// The database sets unfriendly text formats (a DBA's defaults), which the
// replication session must not use.
func TestValuesEqualSelect(t *testing.T) {
	e := newEnv(t)
	for _, set := range []string{"TimeZone = 'Asia/Kathmandu'", "DateStyle = 'SQL, DMY'", "IntervalStyle = 'sql_standard'", "extra_float_digits = 0", "bytea_output = 'escape'"} {
		e.exec(fmt.Sprintf(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %%I SET %s', current_database()); END $$`, strings.ReplaceAll(set, "'", "''")))
	}
	e.exec(orderLines)
	pos := e.start([2]string{"public", "OrderLines"})
	r := e.open(pos)

	e.exec(`INSERT INTO "OrderLines" ("OrderId", small, amount, big_n, note, code, letter, blob, ok, day, at, attz, tm, id, doc, js, feeling, tags, nums, ratio, ratio4, span, qty, addr) VALUES
 (1, -32768, 1.500, 12345678901234567890.000123, 'héllo "wörld"', 'abc', 'x', '\x00ff10', true, '2024-02-29', '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.5+05:30', '23:59:59.999999',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"b": 1, "a": [1, 2.50, null]}', '{"b":1,  "a":2}', 'happy', '{"x","y z",NULL}', '{1,2,-3}', 0.1, 1.1, '1 mon 2 days 03:04:05.5', 7, '10.0.0.1/8'),
 (1, 0, -0.001, 'NaN', '', '', '', '', false, '0001-01-01', '1999-12-31 23:59:59', '1970-01-01 00:00:00+00', '00:00',
  '00000000-0000-0000-0000-000000000000', '[]', 'null', 'sad', '{}', '{}', 1e300, -3.4e38, '-1 year -2 hours', 1, '::1'),
 (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (3, 1, 'NaN', '-Infinity', 'x', 'y', 'z', '\x', true, 'infinity', '-infinity', 'infinity', '12:00', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '{"k": {"n": 1e2}}', '{}', 'sad', '{"{}","a,b"}', '{NULL}', 'Infinity', 'NaN', '0', 2, '192.168.0.0/16')`)
	// The inserts, read back before the update changes them: one
	// transaction per statement above.
	check := func(tx stream.Tx, ops ...stream.Op) {
		t.Helper()
		if len(tx.Changes) != len(ops) {
			t.Fatalf("tx at %s has %d changes, want %d", tx.End, len(tx.Changes), len(ops))
		}
		for i, c := range tx.Changes {
			if c.Op != ops[i] || c.Schema != "public" || c.Table != "OrderLines" {
				t.Fatalf("change %d: %s of %s.%s, want %s of public.OrderLines", i, c.Op, c.Schema, c.Table, ops[i])
			}
		}
	}
	// Each transaction is read before the next statement, and each
	// change's New compared with the row as SELECT reads it then.
	cols := []string(nil)
	compare := func(tx stream.Tx) {
		t.Helper()
		for _, c := range tx.Changes {
			cols = c.Columns
			if c.Unchanged != nil {
				t.Errorf("%s of %v: Unchanged %v, want none", c.Op, c.New[:2], c.Unchanged)
			}
			want := e.row(`SELECT * FROM "OrderLines" WHERE "OrderId" = $1 AND line = $2`, c.New[0], c.New[1])
			sameRow(t, c.Columns, c.New, want)
		}
	}
	tx1 := next(t, r)
	check(tx1, stream.Insert, stream.Insert, stream.Insert, stream.Insert)
	compare(tx1)
	if cols[0] != "OrderId" || cols[1] != "line" || len(cols) != 25 {
		t.Fatalf("columns %v", cols)
	}
	e.exec(`BEGIN; UPDATE "OrderLines" SET amount = amount * 2, note = note || '!', attz = attz + interval '1 day', nums = nums || 9 WHERE "OrderId" = 1;
UPDATE "OrderLines" SET small = 5, doc = '{"z": true}' WHERE "OrderId" = 2; COMMIT`)
	tx2 := next(t, r)
	check(tx2, stream.Update, stream.Update, stream.Update)
	compare(tx2)
	e.exec(`DELETE FROM "OrderLines" WHERE "OrderId" = 3`)
	tx3 := next(t, r)
	check(tx3, stream.Delete)

	// Updates that keep the key carry it in Old; the delete sends the key.
	for _, c := range append(tx2.Changes, tx3.Changes...) {
		for i := range cols {
			if c.OldHas[i] != (i < 2) {
				t.Fatalf("%s: OldHas %v, want the key columns only", c.Op, c.OldHas)
			}
			if i >= 2 && c.Old[i] != nil {
				t.Fatalf("%s: Old[%d] = %v, want nil", c.Op, i, c.Old[i])
			}
		}
	}
	if d := tx3.Changes[0]; d.Old[0] != int64(3) || d.New != nil {
		t.Fatalf("delete: Old %v New %v", d.Old[:2], d.New)
	}
	if tx1.Commit.IsZero() || time.Since(tx1.Commit) > time.Hour || tx1.Bytes <= 0 {
		t.Fatalf("tx1: commit %v bytes %d", tx1.Commit, tx1.Bytes)
	}
}
