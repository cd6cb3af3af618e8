package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The change stream's databases on the bench's PostgreSQL: the source,
// seeded again for every measurement (the backlog changes it), and the
// target, fresh for every measurement.
const (
	streamSrc = "bench_stream_src"
	streamDst = "bench_stream_dst"
)

// streamProc makes a backlog at the source: txs transactions of 10 row
// changes of orders, whose ids live..1 are the seeded rows: in each, 4
// updates (of rows spread over the live ids: title, amount, status,
// updated_at, active), 3 inserts (new ids above the highest, with the
// seed's values) and 3 deletes (the lowest ids), interleaved. The same
// call makes the same changes. It returns the source's WAL insert position
// after the last commit: every transaction of the backlog committed before
// it.
const streamProc = `CREATE PROCEDURE bench_changes(txs int, live bigint, INOUT last_lsn pg_lsn DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
  ins bigint := live; -- the highest id inserted
  del bigint := 0;    -- the ids up to this one are deleted
  u bigint := 0;      -- the updates made
  g bigint;
BEGIN
  FOR i IN 1 .. txs LOOP
    FOR j IN 0 .. 9 LOOP
      IF j % 3 = 0 THEN
        u := u + 1;
        g := del + 1 + (u * 7919) % (ins - del);
        UPDATE orders SET title = 'Order ' || g || ' changed ' || u, amount = amount + 1,
          status = (ARRAY['new', 'paid', 'shipped', 'delivered', 'cancelled'])[u % 5 + 1],
          updated_at = updated_at + interval '1 second', active = NOT active
        WHERE id = g;
      ELSIF j % 3 = 1 THEN
        ins := ins + 1;
        g := ins;
        INSERT INTO orders VALUES (g, md5('u' || g)::uuid, 'Order ' || g || ' for customer ' || (g * 7 % 50000),
          md5('b' || g) || ' ' || md5('c' || g) || ' item ' || (g % 997), (g * 7919 % 10000000) / 100.0,
          (ARRAY['new', 'paid', 'shipped', 'delivered', 'cancelled'])[g % 5 + 1],
          timestamptz '2024-01-01 00:00:00+00' + g * interval '17 seconds' + (g % 999983) * interval '1 microsecond',
          timestamp '2024-01-01 00:00:00' + g * interval '17 seconds' + (g % 86400) * interval '1 second',
          CASE WHEN g % 10 = 3 THEN NULL ELSE rpad('note ' || g || ' ', 60, md5('n' || g)) END, g % 3 <> 0);
      ELSE
        del := del + 1;
        DELETE FROM orders WHERE id = del;
      END IF;
    END LOOP;
    COMMIT;
  END LOOP;
  last_lsn := pg_current_wal_insert_lsn();
END $$`

// streamHash is the count and a hash of the rows of orders, over the
// source's columns (migrate's target has its fence column too).
const streamHash = `SELECT count(*) || ' rows, hash ' || coalesce(sum(hashtextextended(
  ROW(id, ext_id, title, body, amount, status, created_at, updated_at, note, active)::text, 0)), 0) FROM orders`

// streamTxs is the backlog's source transactions (10 changes each).
func (b *Bench) streamTxs() int { return b.cfg.StreamBacklog() / 10 }

// streamLastID is the id the backlog's last transaction inserts: once a
// target holds it, it holds the whole backlog (a consumer applies whole
// source transactions in commit order).
func (b *Bench) streamLastID() int64 { return int64(b.cfg.StreamRows) + 3*int64(b.streamTxs()) }

// streamSeed seeds the table in db: Config.StreamRows rows of the seeded
// table's values.
func (b *Bench) streamSeed(ctx context.Context, db string) error {
	return b.svc.Exec(ctx, PG, db, pgDDL, strings.ReplaceAll(pgSeed, "{N}", strconv.Itoa(b.cfg.StreamRows)), "ANALYZE orders")
}

// streamBacklog makes the backlog at the source, then CHECKPOINTs, so that
// the consumer timed next does not pay for the backlog's writes.
func (b *Bench) streamBacklog(ctx context.Context) error {
	t0 := time.Now()
	var lsn string
	if err := b.svc.Exec(ctx, PG, streamSrc, streamProc); err != nil {
		return err
	}
	q := fmt.Sprintf("CALL bench_changes(%d, %d)", b.streamTxs(), b.cfg.StreamRows)
	if err := b.svc.Scan(ctx, PG, streamSrc, q, &lsn); err != nil {
		return err
	}
	b.logf("  backlog of %d changes in %d transactions made in %.1f s (to %s)", b.cfg.StreamBacklog(), b.streamTxs(), seconds(t0), lsn)
	return b.svc.Checkpoint(ctx)
}

// streamSame checks that the target's rows are the source's.
func (b *Bench) streamSame(ctx context.Context) error {
	var src, dst string
	if err := b.svc.Scan(ctx, PG, streamSrc, streamHash, &src); err != nil {
		return err
	}
	if err := b.svc.Scan(ctx, PG, streamDst, streamHash, &dst); err != nil {
		return err
	}
	if src != dst {
		return fmt.Errorf("the target differs from the source after the backlog: %s, the source %s", dst, src)
	}
	return nil
}

// streamHolds reports whether the target holds the backlog's last
// transaction.
func (b *Bench) streamHolds(ctx context.Context) (bool, error) {
	var ok bool
	err := b.svc.Scan(ctx, PG, streamDst, "SELECT EXISTS (SELECT 1 FROM orders WHERE id = "+strconv.FormatInt(b.streamLastID(), 10)+")", &ok)
	return ok, err
}

// streamReset drops what a measurement left (the subscriptions of the
// target, the replication slots of the source) and makes both databases
// anew: empty, or, with fresh false, gone.
func (b *Bench) streamReset(ctx context.Context, fresh bool) error {
	var errs []error
	if err := b.dropSubscriptions(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := b.dropSlots(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, db := range []string{streamSrc, streamDst} {
		op := b.svc.Drop
		if fresh {
			op = b.svc.Fresh
		}
		if err := op(ctx, PG, db); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dropSubscriptions drops the subscriptions of the target database, not
// their slots (dropSlots does).
func (b *Bench) dropSubscriptions(ctx context.Context) error {
	p, err := b.svc.DB(PG, b.svc.defaultDB(PG))
	if err != nil {
		return err
	}
	rows, err := p.QueryContext(ctx, `SELECT s.subname FROM pg_subscription s JOIN pg_database d ON d.oid = s.subdbid WHERE d.datname = $1`, streamDst)
	if err != nil {
		return fmt.Errorf("list the subscriptions of %s: %w", streamDst, err)
	}
	var subs []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			_ = rows.Close()
			return err
		}
		subs = append(subs, s)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range subs {
		q := pgx.Identifier{s}.Sanitize()
		err := b.svc.Exec(ctx, PG, streamDst, "ALTER SUBSCRIPTION "+q+" DISABLE",
			"ALTER SUBSCRIPTION "+q+" SET (slot_name = NONE)", "DROP SUBSCRIPTION "+q)
		if err != nil {
			return err
		}
	}
	return nil
}

// dropSlots drops every replication slot of the source database (the
// bench's own: migrate's and the subscription's), ending the walsenders
// that read them.
func (b *Bench) dropSlots(ctx context.Context) error {
	p, err := b.svc.DB(PG, b.svc.defaultDB(PG))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := p.ExecContext(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, streamSrc)
		if err == nil {
			_, err = p.ExecContext(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1`, streamSrc)
		}
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &pgErr) && (pgErr.Code == "55006" || pgErr.Code == "42704") && time.Now().Before(deadline):
			// in use: its walsender is on its way out; gone: dropped meanwhile
		default:
			return fmt.Errorf("drop the replication slots of %s: %w", streamSrc, err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// conninfo is the libpq connection string of database db, password
// included: for CREATE SUBSCRIPTION only, never for printing.
func (s *Services) conninfo(db string) string {
	quote := func(v string) string {
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
	}
	parts := []string{"host=" + quote(s.pg.Host()), "port=" + quote(or(s.pg.Port(), "5432")), "user=" + quote(s.pg.User()), "dbname=" + quote(db)}
	if pw := s.pg.Password(); pw != "" {
		parts = append(parts, "password="+quote(pw))
	}
	return strings.Join(parts, " ")
}

// literal is s as a SQL string literal (standard_conforming_strings on).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// serverCPU is the CPU seconds used so far by the server's processes that
// where selects in pg_stat_activity (0 when the server's /proc is not this
// machine's).
func (b *Bench) serverCPU(ctx context.Context, where string, args ...any) (float64, error) {
	p, err := b.svc.DB(PG, b.svc.defaultDB(PG))
	if err != nil {
		return 0, err
	}
	rows, err := p.QueryContext(ctx, "SELECT pid FROM pg_stat_activity WHERE "+where, args...)
	if err != nil {
		return 0, fmt.Errorf("the server processes of the change stream: %w", err)
	}
	defer rows.Close()
	var sum float64
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return 0, err
		}
		if cpu, ok := procCPU(pid); ok {
			sum += cpu
		}
	}
	return sum, rows.Err()
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times.
const clockTicks = 100

// procCPU is the CPU seconds (user and system) process pid has used, from
// /proc; false when it cannot be read.
func procCPU(pid int) (float64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command's name may hold spaces
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // from field 3, the state
	if len(f) < 13 {
		return 0, false
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return float64(user+sys) / clockTicks, true
}

// procPeakKB is the peak RSS (VmHWM, KiB) of process pid so far; 0 when it
// cannot be read.
func procPeakKB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
