package dialect_test

import (
	"database/sql"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
)

// checksumCase is one engine's table for the checksum tests: every change
// must move the checksum, a rewrite of the same values must not.
type checksumCase struct {
	db      *sql.DB
	d       dialect.Dialect
	create  string
	rows    string
	changes []string
	same    string
	cut     string // makes the hash text too long for the engine: the hash must be NULL
}

func TestChecksum(t *testing.T) {
	mysql, my := openMySQL(t)
	cases := map[string]checksumCase{
		"postgres": {
			db: testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t)), d: dialect.Postgres{},
			create: `CREATE TABLE t (id bigint, k2 int, s text, v varchar(10), n numeric(12,3), f8 float8, f4 real, b bool,
  ts timestamp(6), tz timestamptz, d date, u uuid, j jsonb, by bytea, _fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (id, k2))`,
			rows: `INSERT INTO t SELECT g / 10, g % 10, 'abc', NULL, 1.500, 0.1, 1.0000001, true, '2024-02-29 23:59:59.999999',
  '2024-02-29 23:59:59.999999+00', '2024-02-29', '0b9e5a4c-5f3e-4b8e-9a77-1d2e3f405162', '{"a": 1}', '\x00'
  FROM generate_series(0, 99) g`,
			changes: []string{
				`UPDATE t SET v = '' WHERE id = 3 AND k2 = 4`,
				`UPDATE t SET s = 'abc ' WHERE id = 0 AND k2 = 0`,
				`UPDATE t SET s = 'ABC' WHERE id = 9 AND k2 = 9`,
				`UPDATE t SET s = 'a,b', v = 'c' WHERE id = 1 AND k2 = 1; UPDATE t SET s = 'a', v = 'b,c' WHERE id = 1 AND k2 = 2`,
				`UPDATE t SET n = 1.501 WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET f8 = 0.10000000000000002 WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET f4 = 1.0000002 WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET b = false WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET ts = ts + interval '1 microsecond' WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET tz = tz + interval '1 microsecond' WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET d = d + 1 WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET j = '{"a": 1, "b": null}' WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET by = '\x0000' WHERE id = 5 AND k2 = 5`,
				`DELETE FROM t WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET k2 = 10 WHERE id = 5 AND k2 = 9`,
			},
			same: `UPDATE t SET s = s, _fence = 7; SET TimeZone = 'Asia/Kathmandu'; SET extra_float_digits = -3`,
		},
		"mysql": {
			db: mysql, d: my,
			create: "CREATE TABLE t (id bigint, k2 int, s text, v varchar(10), n decimal(12,3), f8 double, f4 float, b tinyint(1)," +
				" ts datetime(6), tz timestamp(6) NULL, d date, j json, `by` varbinary(10), e enum('x','y'), bt bit(8)," +
				" _fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (id, k2))",
			rows: "INSERT INTO t (id, k2, s, v, n, f8, f4, b, ts, tz, d, j, `by`, e, bt)" + `
  WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < 99)
  SELECT n DIV 10, n MOD 10, 'abc', NULL, 1.500, 0.1, 1.0000001, 1, '2024-02-29 23:59:59.999999',
  '2024-02-29 23:59:59.999999', '2024-02-29', '{"a": 1}', X'00', 'x', b'1' FROM g`,
			changes: []string{
				`UPDATE t SET v = '' WHERE id = 3 AND k2 = 4`,
				`UPDATE t SET v = 'N' WHERE id = 3 AND k2 = 4`,
				`UPDATE t SET s = 'abc ' WHERE id = 0 AND k2 = 0`,
				`UPDATE t SET s = 'ABC' WHERE id = 9 AND k2 = 9`,
				`UPDATE t SET s = 'a#b', v = 'c' WHERE id = 1 AND k2 = 1`,
				`UPDATE t SET n = 1.501 WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET f8 = 0.10000000000000002 WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET f4 = 1.0000002 WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET b = 0 WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET ts = ts + INTERVAL 1 MICROSECOND WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET tz = tz + INTERVAL 1 MICROSECOND WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET d = d + INTERVAL 1 DAY WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET j = '{"a": 1, "b": null}' WHERE id = 5 AND k2 = 5`,
				"UPDATE t SET `by` = X'0000' WHERE id = 5 AND k2 = 5",
				`UPDATE t SET e = 'y' WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET bt = b'10' WHERE id = 5 AND k2 = 5`,
				`DELETE FROM t WHERE id = 5 AND k2 = 5`,
				`UPDATE t SET k2 = 10 WHERE id = 5 AND k2 = 9`,
			},
			// No cut: the hash is per row, aggregated (no GROUP_CONCAT and its
			// limit).
			same: `UPDATE t SET s = s, _fence = 7`,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			for _, q := range []string{c.create, c.rows} {
				if _, err := c.db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			cols := tableColumns(t, c.db, c.d, "t")
			key := []string{"id", "k2"}
			hash := func(conn *sql.Conn, lo, hi []any) (n int64, s sql.NullString) {
				t.Helper()
				q := c.d.Checksum([]string{"t"}, cols, key, lo != nil, hi != nil)
				values := make([]any, 2*len(key)) // lo's parts, then hi's
				copy(values, lo)
				copy(values[len(key):], hi)
				if err := conn.QueryRowContext(ctx, q.SQL, q.Bind(values)...).Scan(&n, &s); err != nil {
					t.Fatalf("%s: %v", q.SQL, err)
				}
				return n, s
			}
			sum := func(conn *sql.Conn, lo, hi []any) (int64, string) {
				t.Helper()
				n, s := hash(conn, lo, hi)
				if !s.Valid {
					t.Fatalf("no hash of %v < key <= %v", lo, hi)
				}
				return n, s.String
			}
			conn, err := c.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			n, base := sum(conn, nil, nil)
			if n != 100 {
				t.Fatalf("%d rows, want 100", n)
			}
			// Chunk ends and ranges: the 25th row after (2, 3) is (4, 8).
			q := c.d.ChunkEnd([]string{"t"}, key, true, 25)
			end := []any{new(int64), new(int64)}
			if err := conn.QueryRowContext(ctx, q.SQL, q.Bind([]any{2, 3})...).Scan(end...); err != nil {
				t.Fatal(err)
			}
			if a, b := *end[0].(*int64), *end[1].(*int64); a != 4 || b != 8 {
				t.Fatalf("chunk end (%d, %d), want (4, 8)", a, b)
			}
			if n, _ := sum(conn, []any{2, 3}, []any{4, 8}); n != 25 {
				t.Errorf("(2, 3) < key <= (4, 8): %d rows, want 25", n)
			}
			if n, _ := sum(conn, []any{4, 8}, nil); n != 51 {
				t.Errorf("key > (4, 8): %d rows, want 51", n)
			}
			if n, _ := sum(conn, nil, []any{2, 3}); n != 24 {
				t.Errorf("key <= (2, 3): %d rows, want 24", n)
			}
			for _, change := range c.changes {
				if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
					t.Fatal(err)
				}
				if _, err := conn.ExecContext(ctx, change); err != nil {
					t.Fatalf("%s: %v", change, err)
				}
				if _, s := sum(conn, nil, nil); s == base {
					t.Errorf("checksum unchanged after %s", change)
				}
				if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := conn.ExecContext(ctx, c.same); err != nil {
				t.Fatal(err)
			}
			if _, s := sum(conn, nil, nil); s != base {
				t.Errorf("checksum moved after %s: %s, was %s", c.same, s, base)
			}
			if _, s := sum(conn, []any{9, 9}, nil); s != "" {
				t.Errorf("checksum of no row: %q, want empty", s)
			}
			if c.cut != "" {
				if _, err := conn.ExecContext(ctx, c.cut); err != nil {
					t.Fatal(err)
				}
				if _, s := hash(conn, nil, nil); s.Valid {
					t.Errorf("after %s: hash %s of a cut text, want NULL", c.cut, s.String)
				}
			}
		})
	}
}

// tableColumns reads a table's columns as the runner does.
func tableColumns(t *testing.T, db *sql.DB, d dialect.Dialect, table string) []dialect.Column {
	t.Helper()
	q, args := d.Columns([]string{table})
	rows, err := db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []dialect.Column
	for rows.Next() {
		var c dialect.Column
		if err := rows.Scan(&c.Name, &c.Type, &c.Base, &c.NotNull); err != nil {
			t.Fatal(err)
		}
		if c.Name != "_fence" {
			cols = append(cols, c)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cols
}

// TestConnections: both engines report their connection limit and the
// connections open now, this one included.
func TestConnections(t *testing.T) {
	mysql, my := openMySQL(t)
	pg := testsvc.OpenPostgres(t, testsvc.NewPostgresDB(t))
	for name, c := range map[string]struct {
		db *sql.DB
		d  dialect.Dialect
	}{"postgres": {pg, dialect.Postgres{}}, "mysql": {mysql, my}} {
		var limit, used int
		if err := c.db.QueryRowContext(t.Context(), c.d.Connections()).Scan(&limit, &used); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if limit < 10 || used < 1 || used > limit+10 {
			t.Errorf("%s: limit %d, in use %d", name, limit, used)
		}
	}
}
