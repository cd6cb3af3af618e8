package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The seeded table, and the version of its contents: bump seedVersion when
// the table changes, and the sources are seeded again.
const (
	table       = "orders"
	seedVersion = 1
)

// The same columns in both engines. MariaDB's types are those migrate
// creates from PostgreSQL's (and maps back to them), so every direction
// copies into the same shape as the baselines load.
const (
	pgDDL = `CREATE TABLE orders (
  id bigint PRIMARY KEY,
  ext_id uuid NOT NULL,
  title text NOT NULL,
  body text NOT NULL,
  amount numeric(12,2) NOT NULL,
  status varchar(16) NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamp NOT NULL,
  note varchar(60),
  active boolean NOT NULL
)`
	myDDL = `CREATE TABLE orders (
  id bigint NOT NULL PRIMARY KEY,
  ext_id char(36) NOT NULL,
  title longtext NOT NULL,
  body longtext NOT NULL,
  amount decimal(12,2) NOT NULL,
  status varchar(16) NOT NULL,
  created_at datetime(6) NOT NULL,
  updated_at datetime(6) NOT NULL,
  note varchar(60),
  active tinyint(1) NOT NULL
)`
)

// The values of row g, once per engine's SQL ({N}: the row count; sameData compares them): about
// 250 bytes, note NULL in 10% of the rows.
const (
	pgSeed = `INSERT INTO orders
SELECT g,
  md5('u' || g)::uuid,
  'Order ' || g || ' for customer ' || (g * 7 % 50000),
  md5('b' || g) || ' ' || md5('c' || g) || ' item ' || (g % 997),
  (g * 7919 % 10000000) / 100.0,
  (ARRAY['new', 'paid', 'shipped', 'delivered', 'cancelled'])[g % 5 + 1],
  timestamptz '2024-01-01 00:00:00+00' + g * interval '17 seconds' + (g % 999983) * interval '1 microsecond',
  timestamp '2024-01-01 00:00:00' + g * interval '17 seconds' + (g % 86400) * interval '1 second',
  CASE WHEN g % 10 = 3 THEN NULL ELSE rpad('note ' || g || ' ', 60, md5('n' || g)) END,
  g % 3 <> 0
FROM generate_series(1::bigint, {N}) g`
	mySeed = `INSERT INTO orders
SELECT seq,
  CONCAT_WS('-', SUBSTR(h, 1, 8), SUBSTR(h, 9, 4), SUBSTR(h, 13, 4), SUBSTR(h, 17, 4), SUBSTR(h, 21, 12)),
  CONCAT('Order ', seq, ' for customer ', seq * 7 % 50000),
  CONCAT(MD5(CONCAT('b', seq)), ' ', MD5(CONCAT('c', seq)), ' item ', seq % 997),
  (seq * 7919 % 10000000) / 100,
  ELT(seq % 5 + 1, 'new', 'paid', 'shipped', 'delivered', 'cancelled'),
  TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq * 17 SECOND + INTERVAL seq % 999983 MICROSECOND,
  TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq * 17 SECOND + INTERVAL seq % 86400 SECOND,
  IF(seq % 10 = 3, NULL, RPAD(CONCAT('note ', seq, ' '), 60, MD5(CONCAT('n', seq)))),
  seq % 3 <> 0
FROM (SELECT seq, MD5(CONCAT('u', seq)) AS h FROM seq_1_to_{N}) s`
)

// seedMark is the comment a finished seed of n rows leaves on the table.
func seedMark(n int) string { return fmt.Sprintf("migrate bench seed v%d, %d rows", seedVersion, n) }

// seed puts the table with n rows into db of engine e, unless it is there
// already (marked by a finished seed, with n rows).
func (b *Bench) seed(ctx context.Context, e Engine, db string, n int) error {
	name := map[Engine]string{PG: "PostgreSQL", MY: "MariaDB"}[e]
	if ok, err := b.seeded(ctx, e, db, n); err != nil {
		return err
	} else if ok {
		b.logf("%s %s.%s already has its %d rows", name, db, table, n)
		return nil
	}
	b.logf("seeding %d rows into %s %s.%s", n, name, db, table)
	if err := b.svc.Fresh(ctx, e, db); err != nil {
		return err
	}
	mark := seedMark(n)
	if e == PG {
		return b.svc.Exec(ctx, PG, db, pgDDL, strings.ReplaceAll(pgSeed, "{N}", strconv.Itoa(n)), "ANALYZE orders",
			"COMMENT ON TABLE orders IS '"+mark+"'")
	}
	return b.svc.Exec(ctx, MY, db, myDDL, strings.ReplaceAll(mySeed, "{N}", strconv.Itoa(n)),
		"ALTER TABLE orders COMMENT = '"+mark+"'", "ANALYZE TABLE orders")
}

// seeded reports whether db of engine e holds a finished seed of n rows.
func (b *Bench) seeded(ctx context.Context, e Engine, db string, n int) (bool, error) {
	var comment sql.NullString
	if e == PG {
		var exists bool
		err := b.svc.Scan(ctx, PG, "", "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = '"+db+"')", &exists)
		if err != nil || !exists {
			return false, err
		}
		if err := b.svc.Scan(ctx, PG, db, "SELECT obj_description(to_regclass('orders'), 'pg_class')", &comment); err != nil {
			return false, err
		}
	} else {
		err := b.svc.Scan(ctx, MY, "", "SELECT table_comment FROM information_schema.tables WHERE table_schema = '"+db+"' AND table_name = 'orders'", &comment)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	if comment.String != seedMark(n) {
		return false, nil
	}
	var count int
	if err := b.svc.Scan(ctx, e, db, "SELECT count(*) FROM orders", &count); err != nil {
		return false, err
	}
	return count == n, nil
}

// sameData checks that the first 1000 rows, rendered alike by both
// engines, hash the same.
func (b *Bench) sameData(ctx context.Context) error {
	var a, m string
	err := b.svc.Scan(ctx, PG, srcDB, `SELECT md5(string_agg(concat_ws('|', id, ext_id, title, body, amount, status,
      to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), to_char(updated_at, 'YYYY-MM-DD HH24:MI:SS.US'),
      coalesce(note, 'NULL'), active::int), E'\n' ORDER BY id)) FROM orders WHERE id <= 1000`, &a)
	if err != nil {
		return err
	}
	// One connection: the session's group_concat_max_len must hold for the query.
	p, err := b.svc.DB(MY, srcDB)
	if err != nil {
		return err
	}
	conn, err := p.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION group_concat_max_len = 16777216"); err != nil {
		return err
	}
	err = conn.QueryRowContext(ctx, `SELECT MD5(GROUP_CONCAT(CONCAT_WS('|', id, ext_id, title, body, amount, status,
      DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f'), DATE_FORMAT(updated_at, '%Y-%m-%d %H:%i:%s.%f'),
      IFNULL(note, 'NULL'), active) ORDER BY id SEPARATOR '\n')) FROM orders WHERE id <= 1000`).Scan(&m)
	if err != nil {
		return fmt.Errorf("my %s: hash of rows 1..1000: %w", srcDB, err)
	}
	if a != m {
		return fmt.Errorf("the seeded tables differ between PostgreSQL (%s) and MariaDB (%s) on rows 1..1000", a, m)
	}
	return nil
}

// checkLoaded checks, after a baseline load (untimed), that dstDB of
// engine e has the source's rows and NULLs.
func (b *Bench) checkLoaded(ctx context.Context, e Engine) error {
	const q = "SELECT count(*), count(note) FROM orders"
	var src, dst [2]int64
	if err := b.svc.Scan(ctx, e, srcDB, q, &src[0], &src[1]); err != nil {
		return err
	}
	if err := b.svc.Scan(ctx, e, dstDB, q, &dst[0], &dst[1]); err != nil {
		return err
	}
	if src != dst {
		return fmt.Errorf("the %s baseline loaded (%d %d) rows, non-NULL notes; the source has (%d %d)", e, dst[0], dst[1], src[0], src[1])
	}
	return nil
}
