package main_test

// End-to-end tests of the change stream (docs/streaming.md): `migrate run
// --follow` copies the tables while an application keeps writing to the
// source, applies the source's changes into the target until `migrate
// cutover`, and survives the SIGKILL of the instance that applies the
// stream in the middle of the copy and the freeze (SIGSTOP) of its
// successor; the target is compared with the source by the test's own
// canonical dump, not only by migrate's verification.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// Seed sizes of the follow tests: accounts 1..followAccounts (every fifth
// with a note of 4-8 kB, TOASTed out of line in PostgreSQL), and orders
// 1..followOrders of followLines lines each.
const (
	followAccounts = 30000
	followOrders   = 3000
	followLines    = 10
)

// TestFollow_WriterDuringCopy copies an application-shaped schema (a
// mixed-case table with an identity key, numeric, an enum, large TOASTed
// notes and a timestamp with a default; a table with a composite key)
// while a writer keeps changing the source at a steady rate: inserts,
// updates that leave the large notes unchanged, key-changing updates, a
// delete and re-insert of one key in one transaction. Two instances run
// `run --follow`; the one applying the stream is SIGKILLed mid-copy (the
// other takes the stream and the shards over, a third one starts), and once
// the copy is done the next holder of the stream is frozen past its lease
// and woken (refused, or harmless). Then the writer stops, `cutover` must
// catch up and verify, and the target must equal the source row for row.
func TestFollow_WriterDuringCopy(t *testing.T) {
	t.Parallel()
	inDirections(t, directions, func(t *testing.T, e *env) {
		e.leaseTTL, e.batchSize = "3s", 500
		const ttl = 3 * time.Second
		src := privateSource(t, e)
		seedFollow(t, e)
		plan := e.plan(t,
			planTable{name: "Accounts", shards: 2},
			planTable{name: "order_lines", shards: 2})
		f := &follower{e: e, plan: plan, procs: map[string]*proc{}}
		abandonOnCleanup(t, e, plan) // before the instances: their cleanups (kills) run first

		// 1. Two instances; the application writes from the moment the
		// stream started (so that every change it makes is one the
		// stream must apply: counted below); the stream's holder is
		// killed mid-copy.
		copyStart := time.Now()
		f.start(t, "a")
		f.start(t, "b")
		poll(t, 60*time.Second, "the change stream started", func() bool {
			f.alive(t)
			st := f.status(t)
			return st.Stream != nil && st.Stream.StartPos != ""
		})
		w := startWriter(t, e, followAccounts, 1_000_000)
		defer w.stop()
		var h streamHolder
		poll(t, 120*time.Second, "the copy in progress with a holder of the stream", func() bool {
			f.alive(t)
			rows, cps, done, err := f.copyProgress(t)
			if err != nil || rows == 0 || cps == 0 || done == cps {
				if err == nil && cps == 4 && done == 4 {
					t.Fatalf("the copy was done (%d rows) before the test saw it in progress: make it longer", rows)
				}
				return false
			}
			var ok bool
			h, ok = f.holder(t)
			return ok
		})
		victim := f.procOf(t, h.owner)
		rows, cps, done, _ := f.copyProgress(t)
		signal(t, victim, syscall.SIGKILL)
		if killed, ok := waitExit(victim, 30*time.Second); !ok || killed.code != -1 {
			t.Fatalf("the stream's holder %s was not killed: %s", h.owner, killed)
		}
		f.gone(victim)
		t.Logf("killed %s, the stream's holder (token %d, from %s) mid-copy: %d rows copied, %d of %d shards done",
			h.owner, h.token, h.source(), rows, done, cps)
		f.start(t, "c")

		// 2. Every shard done: the others took the stream and the shards over.
		var maxLagMs int64
		var st followStatus
		var polled time.Time
		poll(t, 240*time.Second, "every shard done", func() bool {
			f.alive(t)
			if time.Since(polled) < 200*time.Millisecond { // status is a process: spare the 2 cores
				return false
			}
			polled = time.Now()
			st = f.status(t)
			if st.Stream != nil {
				maxLagMs = max(maxLagMs, st.Stream.LagMs)
			}
			return st.copyDone()
		})
		copyTime := time.Since(copyStart)
		if st.Stream == nil || st.Stream.State != "following" {
			t.Errorf("stream after the copy %+v, want following", st.Stream)
		}
		// The copy may end before the killed holder's lease expired: the
		// takeover of the stream is waited for, not assumed done.
		var h2 streamHolder
		poll(t, 60*time.Second, "another instance holding the stream with a higher token than the killed one's", func() bool {
			f.alive(t)
			var ok bool
			h2, ok = f.holder(t)
			return ok && h2.token > h.token && label(h2.owner) != label(h.owner)
		})
		t.Logf("copy done in %v (both tables, 4 shards) with the writer running; stream: %s", copyTime.Round(time.Millisecond), st.streamText())
		changesAtCopyEnd := w.changes.Load()
		poll(t, 60*time.Second, "the writer running 2s more", func() bool {
			f.alive(t)
			return time.Since(copyStart) >= copyTime+2*time.Second && w.changes.Load() > changesAtCopyEnd
		})

		// 3. The stream's holder frozen past its lease, then woken.
		h3, ok := f.holder(t)
		if !ok {
			t.Fatal("nobody holds the stream before the freeze")
		}
		zombie := f.procOf(t, h3.owner)
		signal(t, zombie, syscall.SIGSTOP)
		frozen := time.Now()
		var h4 streamHolder
		poll(t, 90*time.Second, "another instance holding the stream with a higher token", func() bool {
			f.alive(t, zombie)
			var ok bool
			h4, ok = f.holder(t)
			return ok && h4.token > h3.token && label(h4.owner) != label(h3.owner)
		})
		t.Logf("froze %s (token %d); %s took the stream over with token %d after %v",
			h3.owner, h3.token, h4.owner, h4.token, time.Since(frozen).Round(time.Millisecond))
		if hold := ttl + 2*time.Second - time.Since(frozen); hold > 0 {
			time.Sleep(hold) // the freeze's duration, not a synchronization
		}
		signal(t, zombie, syscall.SIGCONT)
		zombieExited := false
		if z, ok := waitExit(zombie, 30*time.Second); ok {
			zombieExited = true
			f.gone(zombie)
			switch z.code {
			case 4:
				t.Logf("the woken holder %s was refused: exit 4 after %v", h3.owner, z.elapsed.Round(time.Millisecond))
			case 0:
				t.Logf("the woken holder %s exited 0 (no write in flight) before any cutover", h3.owner)
			default:
				t.Errorf("the woken holder %s: want exit 4 (fenced) or 0, got %s", h3.owner, z)
			}
			logStale(t, h3.owner, z.stderr)
		} else {
			t.Logf("the woken holder %s is still running 30s after SIGCONT (a standby now): it must exit 0 after the cutover", h3.owner)
		}

		f.checkLeaseInStatus(t)

		// 4. The source crashes and restarts (the application stopped
		// first, so that each change it counted is one the source kept);
		// the application writes again and the stream goes on.
		wst := w.stop()
		if errs := w.errors(); len(errs) > 0 {
			t.Errorf("the writer failed %d times; the first: %v", len(errs), errs[0])
		}
		src.crash()
		time.Sleep(2 * time.Second) // down for a while
		src.start()
		t.Logf("the source crashed and restarted; the application had made %d changes", wst.changes)
		w2 := startWriter(t, e, w.accounts, w.nextOrder)
		defer w2.stop()
		poll(t, 90*time.Second, "the stream applying changes made after the source's restart", func() bool {
			f.alive(t, zombie)
			r := runMigrate(t, "status", "-p", f.plan, "--json") // it reads the source too: it may fail while the source recovers
			var st followStatus
			return r.code == 0 && decodeJSONOK(r.stdout, &st) && st.Stream != nil && st.Stream.Changes > wst.changes && w2.changes.Load() > 100
		})

		// 5. The application stops writing; the cutover.
		w2st := w2.stop()
		if errs := w2.errors(); len(errs) > 0 {
			t.Errorf("the writer failed %d times after the restart; the first: %v", len(errs), errs[0])
		}
		wst.changes += w2st.changes
		wst.txs += w2st.txs
		wst.collisions += w2st.collisions
		wst.elapsed += w2st.elapsed
		t.Logf("writer: %d changes in %d transactions over %v (%.0f changes/s), %d key collisions retried",
			wst.changes, wst.txs, wst.elapsed.Round(time.Millisecond), float64(wst.changes)/wst.elapsed.Seconds(), wst.collisions)
		if wst.changes == 0 {
			t.Fatal("the writer changed nothing")
		}
		// Waited for past its own --timeout (runMigrate's bound is as long).
		cp := startMigrate(t, "cutover", "-p", plan, "--json", "--timeout", "2m")
		cut, ok := waitExit(cp, 2*time.Minute+30*time.Second)
		if !ok {
			t.Fatalf("cutover did not exit 30s after its --timeout 2m\n%s", cp.stderr.String())
		}
		var cj cutoverJSON
		decodeJSON(t, cut, &cj)
		var raw any
		_ = json.Unmarshal([]byte(cut.stdout), &raw)
		keys := []string{"plan", "source_pos", "applied_pos", "lag_at_start_ms", "catch_up_ms", "verify_ms", "write_freeze_ms", "changes_applied", "slot_dropped"}
		if cut.code == 0 || cut.code == 3 { // verify: the verification's result, when it ran
			keys = append(keys, "verify")
		}
		requireKeys(t, "cutover --json", raw, keys...)
		if cut.code != 0 {
			t.Errorf("cutover: want exit 0, got %s\nstatus: %s", cut, f.status(t).streamText())
		}
		t.Logf("cutover: source_pos %s applied_pos %s lag_at_start %dms catch-up %dms verify %dms write freeze %dms, %d changes applied, slot dropped %v",
			cj.SourcePos, cj.AppliedPos, cj.LagAtStartMs, cj.CatchUpMs, cj.VerifyMs, cj.FreezeMs, cj.Changes, cj.SlotDropped)
		if cj.FreezeMs <= 0 {
			t.Errorf("cutover write_freeze_ms %d, want > 0", cj.FreezeMs)
		}
		if cut.code == 0 && (cj.Verify == nil || !cj.Verify.Equal) {
			t.Errorf("cutover verify %s, want equal", cut.stdout)
		}
		if e.src == pgEngine {
			if !cj.SlotDropped {
				t.Errorf("cutover slot_dropped false from a PostgreSQL source")
			}
			if n := queryInt(t, e.srcDB, "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()"); n != 0 {
				t.Errorf("%d replication slots left in the source database after the cutover", n)
			}
		}
		if st := f.status(t); st.Stream == nil || st.Stream.State != "stopped" {
			t.Errorf("stream after the cutover: %s, want stopped", st.streamText())
		} else {
			t.Logf("stream after the cutover: %d changes in %d transactions applied; max lag_ms seen during the copy %d",
				st.Stream.Changes, st.Stream.Transactions, maxLagMs)
			// The stream's count is committed with the changes it counts:
			// a transaction applied twice (a replay past the committed
			// position after a takeover or the restart) counts twice.
			if st.Stream.Changes != wst.changes {
				t.Errorf("the stream applied %d changes; the application made %d: each must be applied once", st.Stream.Changes, wst.changes)
			}
		}

		// 6. The target equals the source, row for row.
		sameDump(t, e, "Accounts", []string{"id"}, []string{"id", "email", "balance", "status", "note", "updated_at"})
		sameDump(t, e, "order_lines", []string{"order_id", "line"}, []string{"order_id", "line", "qty", "sku"})

		// 7. The remaining instances exit 0.
		if cut.code != 0 {
			t.Fatal("the cutover failed: the instances are not stopped")
		}
		for name, p := range f.procs {
			r, ok := waitExit(p, 90*time.Second)
			if !ok {
				t.Errorf("instance %s still runs 90s after the cutover\n%s", name, p.stderr.String())
				continue
			}
			if r.code != 0 {
				t.Errorf("instance %s after the cutover: want exit 0, got %s", name, r)
			}
			if p == zombie && !zombieExited {
				logStale(t, h3.owner, r.stderr)
			}
		}
	})
}

// TestFollow_Preconditions: `validate --follow` passes on a source that
// can stream (PostgreSQL: wal_level logical, a key on every table; MySQL:
// a ROW binlog) and names a PostgreSQL table whose updates cannot be
// captured (no primary key, REPLICA IDENTITY DEFAULT) until it gets
// REPLICA IDENTITY FULL; and a plan whose copy was done without --follow
// cannot be followed now (the changes made since are in no stream): `run
// --follow` halts (exit 5), says why, and leaves no slot at the source.
//
// In the same-engine pairs: the checks read the source, and the refusal
// the target's checkpoints before the capture starts.
func TestFollow_Preconditions(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		e.leaseTTL = "3s"
		seedBig(t, e, "big", 20000)
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 2})
		abandonOnCleanup(t, e, plan)
		wantCode(t, runMigrate(t, "validate", "-p", plan, "--follow"), 0)

		if e.src == pgEngine {
			exec1(t, e.srcDB, "CREATE TABLE nokey (id bigint NOT NULL UNIQUE, v text)")
			exec1(t, e.srcDB, "INSERT INTO nokey SELECT g, 'v' || g FROM generate_series(1, 10) g")
			keyless := e.plan(t, planTable{name: "big", key: []string{"id"}}, planTable{name: "nokey", key: []string{"id"}})
			wantCode(t, runMigrate(t, "validate", "-p", keyless), 0)
			r := runMigrate(t, "validate", "-p", keyless, "--follow")
			wantCode(t, r, 2)
			if out := r.stdout + r.stderr; !strings.Contains(out, "nokey") || !strings.Contains(out, "REPLICA IDENTITY FULL") || strings.Contains(out, `"big"`) {
				t.Errorf("validate --follow of a table without a primary key: want the table nokey named with its fix (REPLICA IDENTITY FULL), and not big:\n%s", r)
			}
			exec1(t, e.srcDB, "ALTER TABLE nokey REPLICA IDENTITY FULL")
			wantCode(t, runMigrate(t, "validate", "-p", keyless, "--follow"), 0)
		}

		wantCode(t, runMigrate(t, "run", "-p", plan, "--no-progress"), 0)
		r := runMigrate(t, "run", "-p", plan, "--follow", "--no-progress")
		wantCode(t, r, 5)
		if !strings.Contains(r.stderr+r.stdout, "without --follow") {
			t.Errorf("run --follow after a copy without it: the message does not mention \"without --follow\":\n%s", r)
		}
		if e.src == pgEngine {
			if n := queryInt(t, e.srcDB, "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()"); n != 0 {
				t.Errorf("%d replication slots at the source after the refused run --follow", n)
			}
			if n := queryInt(t, e.srcDB, "SELECT count(*) FROM pg_publication"); n != 0 {
				t.Errorf("%d publications at the source after the refused run --follow", n)
			}
		}
	})
}

// source is a private source server, which the test crashes and restarts.
type source struct{ crash, start func() }

// privateSource gives e a source database on a private server of its
// engine (PostgreSQL: with the unfriendly text formats of the shared
// server's test databases, and commits flushed, which the private server
// does not do by default; MariaDB: a ROW binlog with full images).
func privateSource(t *testing.T, e *env) source {
	t.Helper()
	if e.src == mysqlEngine {
		srv := testsvc.StartMariaDB(t, "--server-id=1", "--log-bin=mysql-bin", "--binlog-format=ROW", "--binlog-row-image=FULL")
		e.srcURL = srv.AddUser(t, "migrate", "my-private-pw", "")
		e.srcDB = testsvc.OpenMySQL(t, e.srcURL)
		return source{srv.Crash, srv.Start}
	}
	srv := testsvc.StartPostgres(t)
	e.srcURL, e.srcDB = srv.URL, testsvc.OpenPostgres(t, srv.URL)
	for _, set := range []string{"timezone = 'Asia/Kathmandu'", "DateStyle = 'SQL, DMY'", "extra_float_digits = 0", "bytea_output = 'escape'", "synchronous_commit = on"} {
		exec1(t, e.srcDB, "ALTER DATABASE migrate SET "+set)
	}
	return source{srv.Crash, srv.Start}
}

// seedFollow creates the application-shaped schema in e's source and
// seeds it: "Accounts" (followAccounts rows) and order_lines
// (followOrders × followLines rows).
func seedFollow(t *testing.T, e *env) {
	t.Helper()
	if e.src == mysqlEngine {
		exec1(t, e.srcDB, "CREATE TABLE `Accounts` (id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, email varchar(100) NOT NULL, "+
			"balance decimal(12,2) NOT NULL DEFAULT 0, status ENUM('active','closed') NOT NULL DEFAULT 'active', note text, "+
			"updated_at datetime(0) NOT NULL DEFAULT CURRENT_TIMESTAMP)")
		exec1(t, e.srcDB, "CREATE TABLE order_lines (order_id bigint NOT NULL, line int NOT NULL, qty int NOT NULL, sku varchar(20), PRIMARY KEY (order_id, line))")
		exec1(t, e.srcDB, fmt.Sprintf("INSERT INTO `Accounts` (id, email, balance, status, note, updated_at) "+
			"SELECT g, CONCAT('user', g, '@example.com'), ((g * 7919) %% 1000000) / 100, IF(g %% 7 = 0, 'closed', 'active'), "+
			"CASE WHEN g %% 5 = 0 THEN CONCAT(REPEAT(MD5(g), 125 + g %% 125), 'end') WHEN g %% 11 = 0 THEN NULL ELSE CONCAT('note ', g) END, "+
			"TIMESTAMP '2024-01-01 00:00:00' + INTERVAL g MINUTE FROM %s", seq(e.src, followAccounts, "s")))
		exec1(t, e.srcDB, fmt.Sprintf("INSERT INTO order_lines (order_id, line, qty, sku) "+
			"SELECT o.g, l.g, (o.g + l.g) %% 50 + 1, CONCAT('SKU-', (o.g * 10 + l.g) %% 9973) FROM %s, %s",
			seq(e.src, followOrders, "o"), seq(e.src, followLines, "l")))
	} else {
		exec1(t, e.srcDB, "CREATE TYPE account_status AS ENUM ('active', 'closed')")
		exec1(t, e.srcDB, `CREATE TABLE "Accounts" (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, email varchar(100) NOT NULL,
  balance numeric(12,2) NOT NULL DEFAULT 0, status account_status NOT NULL DEFAULT 'active', note text,
  updated_at timestamp(0) without time zone NOT NULL DEFAULT localtimestamp(0))`)
		// Out of line and uncompressed past ~2 kB: an UPDATE that leaves a
		// large note alone sends it as an unchanged TOAST value ('u').
		exec1(t, e.srcDB, `ALTER TABLE "Accounts" ALTER COLUMN note SET STORAGE EXTERNAL`)
		exec1(t, e.srcDB, `CREATE TABLE order_lines (order_id bigint NOT NULL, line integer NOT NULL, qty integer NOT NULL, sku varchar(20), PRIMARY KEY (order_id, line))`)
		exec1(t, e.srcDB, fmt.Sprintf(`INSERT INTO "Accounts" (id, email, balance, status, note, updated_at)
SELECT g, 'user' || g || '@example.com', ((g * 7919) %% 1000000)::numeric / 100,
  (CASE WHEN g %% 7 = 0 THEN 'closed' ELSE 'active' END)::account_status,
  CASE WHEN g %% 5 = 0 THEN (SELECT string_agg(md5(g::text || '/' || i), '') FROM generate_series(1, 125 + g %% 125) i) || 'end'
       WHEN g %% 11 = 0 THEN NULL ELSE 'note ' || g END,
  timestamp '2024-01-01 00:00:00' + g * interval '1 minute'
FROM generate_series(1, %d) g`, followAccounts))
		exec1(t, e.srcDB, fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('"Accounts"', 'id'), %d)`, followAccounts))
		exec1(t, e.srcDB, fmt.Sprintf(`INSERT INTO order_lines (order_id, line, qty, sku)
SELECT o.g, l.g, (o.g + l.g) %% 50 + 1, 'SKU-' || (o.g * 10 + l.g) %% 9973 FROM generate_series(1, %d) o(g), generate_series(1, %d) l(g)`,
			followOrders, followLines))
		if n := queryInt(t, e.srcDB, `SELECT count(*) FROM "Accounts" WHERE pg_column_size(note) > 4000`); n < followAccounts/5 {
			t.Fatalf("%d large notes in the source, want %d", n, followAccounts/5)
		}
	}
	analyze(t, e.src, e.srcDB, "Accounts")
	analyze(t, e.src, e.srcDB, "order_lines")
}

// abandonOnCleanup runs `migrate abandon` when the test ends (a slot left
// behind keeps the source's WAL and blocks DROP DATABASE), and drops any
// slot still left in a PostgreSQL source's database. It runs the binary
// itself: the test's context is done by then.
func abandonOnCleanup(t *testing.T, e *env, plan string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, migrateBin, "abandon", "-p", plan)
		cmd.Env = childEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("cleanup: migrate abandon: %v\n%s", err, out)
		}
		if e.src != pgEngine {
			return
		}
		rows, err := e.srcDB.QueryContext(ctx, "SELECT slot_name FROM pg_replication_slots WHERE database = current_database()")
		if err != nil {
			t.Logf("cleanup: list the slots: %v", err)
			return
		}
		var slots []string
		for rows.Next() {
			var s string
			if rows.Scan(&s) == nil {
				slots = append(slots, s)
			}
		}
		rows.Close()
		for _, s := range slots {
			t.Logf("cleanup: replication slot %s left after abandon: dropping it", s)
			if _, err := e.srcDB.ExecContext(ctx, "SELECT pg_drop_replication_slot($1)", s); err != nil {
				t.Logf("cleanup: drop slot %s: %v", s, err)
			}
		}
	})
}

// follower is the test's `run --follow` instances of one plan.
type follower struct {
	e     *env
	plan  string
	procs map[string]*proc // running (or not yet waited for), by --instance label
	// leaseInStatus: status --json listed the stream's lease at least once;
	// fallbacks counts the times the holder was read from the watermark.
	leaseInStatus bool
	fallbacks     int
}

func (f *follower) start(t *testing.T, name string) *proc {
	t.Helper()
	p := startMigrate(t, "run", "-p", f.plan, "--follow", "--no-progress", "--instance", name)
	f.procs[name] = p
	t.Cleanup(func() {
		if t.Failed() {
			log := p.stderr.String()
			if n := strings.Count(log, "\n"); n > 150 {
				log = "…\n" + strings.Join(strings.Split(log, "\n")[n-150:], "\n")
			}
			t.Logf("instance %s's log:\n%s", name, log)
		}
	})
	return p
}

// gone forgets an instance that was killed or has exited.
func (f *follower) gone(p *proc) {
	for name, q := range f.procs {
		if q == p {
			delete(f.procs, name)
		}
	}
}

// alive fails the test when an instance (but those in except) has exited.
func (f *follower) alive(t *testing.T, except ...*proc) {
	t.Helper()
	for name, p := range f.procs {
		if slices.Contains(except, p) {
			continue
		}
		select {
		case <-p.done:
			r, _ := waitExit(p, 0)
			t.Fatalf("instance %s exited before the cutover:\n%s", name, r)
		default:
		}
	}
}

// procOf is the instance whose owner id is owner.
func (f *follower) procOf(t *testing.T, owner string) *proc {
	t.Helper()
	p, ok := f.procs[label(owner)]
	if !ok {
		t.Fatalf("no running instance %q (owner %s)", label(owner), owner)
	}
	return p
}

// label is the --instance label an owner id begins with.
func label(owner string) string { return strings.SplitN(owner, "-", 2)[0] }

// copyProgress reads the plan's checkpoints from the target: rows done,
// checkpoints, and those done (an error before the table exists).
func (f *follower) copyProgress(t *testing.T) (rows, cps, done int64, err error) {
	t.Helper()
	var r, d sql.NullInt64
	err = f.e.dstDB.QueryRowContext(t.Context(), "SELECT sum(rows_done), count(*), sum(CASE WHEN state = 'done' THEN 1 ELSE 0 END) FROM _migrate_checkpoint WHERE plan = "+
		f.e.dst.ph(1), f.e.name).Scan(&r, &cps, &d)
	return r.Int64, cps, d.Int64, err
}

// followStatus is what the tests read of `status --json`.
type followStatus struct {
	Tables []struct {
		Table    string `json:"table"`
		Shard    int    `json:"shard"`
		State    string `json:"state"`
		RowsDone int64  `json:"rows_done"`
	} `json:"tables"`
	Leases []struct {
		Table  string `json:"table"`
		Target string `json:"target"`
		Shard  int    `json:"shard"`
		Owner  string `json:"owner"`
		Token  int64  `json:"token"`
	} `json:"leases"`
	Totals []struct {
		Table      string `json:"table"`
		Shards     int    `json:"shards"`
		ShardsDone int    `json:"shards_done"`
		RowsDone   int64  `json:"rows_done"`
	} `json:"totals"`
	Stream *struct {
		State         string     `json:"state"`
		Pos           string     `json:"pos"`
		StartPos      string     `json:"start_pos"`
		Transactions  int64      `json:"transactions"`
		Changes       int64      `json:"changes"`
		LagMs         int64      `json:"lag_ms"`
		LagBytes      int64      `json:"lag_bytes"`
		AppliedAt     *time.Time `json:"applied_at"`
		RetainedBytes *int64     `json:"retained_bytes"`
	} `json:"stream"`
}

// streamText is the stream's status on one line.
func (s followStatus) streamText() string {
	st := s.Stream
	if st == nil {
		return "none"
	}
	retained := "null"
	if st.RetainedBytes != nil {
		retained = strconv.FormatInt(*st.RetainedBytes, 10)
	}
	return fmt.Sprintf("%s at %s (from %s), %d changes in %d transactions, lag %dms / %d bytes, retained %s bytes",
		st.State, st.Pos, st.StartPos, st.Changes, st.Transactions, st.LagMs, st.LagBytes, retained)
}

// copyDone: both tables' shards are all done.
func (s followStatus) copyDone() bool {
	if len(s.Totals) != 2 {
		return false
	}
	for _, tt := range s.Totals {
		if tt.Shards == 0 || tt.ShardsDone != tt.Shards {
			return false
		}
	}
	return true
}

func (f *follower) status(t *testing.T) followStatus {
	t.Helper()
	r := runMigrate(t, "status", "-p", f.plan, "--json")
	wantCode(t, r, 0)
	var st followStatus
	decodeJSON(t, r, &st)
	return st
}

// streamHolder is who holds the stream's lease, and with which token.
type streamHolder struct {
	owner      string
	token      int64
	fromStatus bool // false: read from the stream's watermark in the target
}

func (h streamHolder) source() string {
	if h.fromStatus {
		return "status leases"
	}
	return "the target's watermark"
}

// holder finds the stream's holder in status' leases (table "_stream",
// shard -2); when status does not list it (between a lease's expiry and
// the next claim, or when status lacks it: checkLeaseInStatus), in the
// stream's watermark row (the last claim's owner and token).
func (f *follower) holder(t *testing.T) (streamHolder, bool) {
	t.Helper()
	for _, l := range f.status(t).Leases {
		if (l.Table == "_stream" || l.Target == "_stream") && l.Shard == -2 {
			f.leaseInStatus = true
			return streamHolder{owner: l.Owner, token: l.Token, fromStatus: true}, true
		}
	}
	var h streamHolder
	q := fmt.Sprintf("SELECT owner, token FROM _migrate_fence WHERE plan = %s AND tbl = %s AND shard = -2", f.e.dst.ph(1), f.e.dst.ph(2))
	if err := f.e.dstDB.QueryRowContext(t.Context(), q, f.e.name, "_stream").Scan(&h.owner, &h.token); err != nil {
		return h, false
	}
	f.fallbacks++
	return h, true
}

// checkLeaseInStatus fails the test when status --json never listed the
// stream's lease.
func (f *follower) checkLeaseInStatus(t *testing.T) {
	t.Helper()
	if !f.leaseInStatus {
		t.Errorf("status --json never listed the stream's lease (table \"_stream\", shard -2) in leases; the test found its holder %d times in the target's watermark instead", f.fallbacks)
	} else if f.fallbacks > 0 {
		t.Logf("the stream's holder was read %d times from the watermark (no live lease in status at that moment)", f.fallbacks)
	}
}

// waitExit waits at most d for p to exit.
func waitExit(p *proc, d time.Duration) (result, bool) {
	exited := func() result {
		return result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String(), elapsed: time.Since(p.start)}
	}
	select {
	case <-p.done:
		return exited(), true
	default:
	}
	select {
	case <-p.done:
		return exited(), true
	case <-time.After(d):
		return result{}, false
	}
}

// logStale logs the lines of a woken holder's log that tell of a refusal.
func logStale(t *testing.T, owner, stderr string) {
	t.Helper()
	var lines []string
	for l := range strings.SplitSeq(stderr, "\n") {
		low := strings.ToLower(l)
		if strings.Contains(low, "fence") || strings.Contains(low, "stale") || strings.Contains(low, "refused") || strings.Contains(low, "lease") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	t.Logf("the woken holder %s logged %d lines of fences, leases or refusals; the last:\n%s", owner, len(lines), strings.Join(lines, "\n"))
}

// cutoverJSON is `migrate cutover --json`.
type cutoverJSON struct {
	Plan         string `json:"plan"`
	SourcePos    string `json:"source_pos"`
	AppliedPos   string `json:"applied_pos"`
	LagAtStartMs int64  `json:"lag_at_start_ms"`
	CatchUpMs    int64  `json:"catch_up_ms"`
	VerifyMs     int64  `json:"verify_ms"`
	FreezeMs     int64  `json:"write_freeze_ms"`
	Changes      int64  `json:"changes_applied"`
	Verify       *struct {
		Equal bool `json:"equal"`
	} `json:"verify"`
	SlotDropped bool `json:"slot_dropped"`
}

// writer is an application writing to the source at a steady pace, on a
// pool of its own, until stopped.
type writer struct {
	e      *env
	db     *sql.DB
	rng    *rand.Rand
	start  time.Time
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once
	result writerStats

	changes    atomic.Int64 // rows inserted, updated or deleted
	txs        atomic.Int64
	collisions atomic.Int64
	mu         sync.Mutex
	errs       []error

	accounts  int64 // the highest account id inserted (about: identity values)
	nextOrder int64
}

type writerStats struct {
	changes, txs, collisions int64
	elapsed                  time.Duration
}

// writerTick paces the writer: a transaction per tick (1-4 changes each,
// about 300-500 changes/s).
const writerTick = 6 * time.Millisecond

// startWriter starts the application; accounts and nextOrder are where
// its inserts' keys begin (an earlier writer's, to go on from them).
func startWriter(t *testing.T, e *env, accounts, nextOrder int64) *writer {
	t.Helper()
	w := &writer{e: e, quit: make(chan struct{}), done: make(chan struct{}), accounts: accounts, nextOrder: nextOrder}
	if e.src == mysqlEngine {
		w.db = testsvc.OpenMySQL(t, e.srcURL)
	} else {
		w.db = testsvc.OpenPostgres(t, e.srcURL)
	}
	w.db.SetMaxOpenConns(1)
	seed := uint64(time.Now().UnixNano())
	t.Logf("writer seed %d", seed)
	w.rng = rand.New(rand.NewPCG(seed, 7))
	w.start = time.Now()
	go w.run()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *writer) run() {
	defer close(w.done)
	tk := time.NewTicker(writerTick)
	defer tk.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-tk.C:
		}
		if err := w.step(); err != nil {
			w.mu.Lock()
			w.errs = append(w.errs, err)
			w.mu.Unlock()
		}
	}
}

// stop stops the writer after its transaction in flight.
func (w *writer) stop() writerStats {
	w.once.Do(func() {
		close(w.quit)
		<-w.done
		w.result = writerStats{changes: w.changes.Load(), txs: w.txs.Load(), collisions: w.collisions.Load(), elapsed: time.Since(w.start)}
	})
	return w.result
}

func (w *writer) errors() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.errs)
}

// isDup is a unique-key violation (PostgreSQL 23505, MySQL 1062).
func isDup(err error) bool {
	s := err.Error()
	return strings.Contains(s, "23505") || strings.Contains(s, "Error 1062")
}

// step runs one transaction of the application; a key collision (a moved
// line's new key taken) is retried with other keys.
func (w *writer) step() error {
	for try := 0; ; try++ {
		err := w.tx()
		if err == nil || !isDup(err) || try == 5 {
			return err
		}
		w.collisions.Add(1)
	}
}

// stmt is one statement of a transaction.
type stmt struct {
	q    string
	args []any
}

func (w *writer) tx() error {
	stmts := w.pick()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var n int64
	for _, s := range stmts {
		res, err := tx.ExecContext(ctx, s.q, s.args...)
		if err != nil {
			return fmt.Errorf("%s %v: %w", s.q, s.args, err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return err
		}
		n += k
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	w.changes.Add(n)
	w.txs.Add(1)
	return nil
}

// pick chooses the next transaction's statements.
func (w *writer) pick() []stmt {
	r := w.rng
	switch k := r.IntN(100); {
	case k < 15: // a new account
		w.accounts++
		return []stmt{w.insertAccount(0)}
	case k < 30: // a new order of 1-4 lines
		w.nextOrder++
		var s []stmt
		for l := range 1 + r.IntN(4) {
			s = append(s, w.insertLine(w.nextOrder, int64(l+1)))
		}
		return s
	case k < 50: // balances and statuses of 1-3 accounts, the large notes left alone
		var s []stmt
		for range 1 + r.IntN(3) {
			s = append(s, w.updateBalance(w.someAccount(true)))
		}
		return s
	case k < 55: // a note
		return []stmt{w.updateNote(w.someAccount(false))}
	case k < 62: // an account deleted
		return []stmt{{w.sql("DELETE FROM %A WHERE id = $1"), []any{w.someAccount(false)}}}
	case k < 67: // a line deleted
		o, l := w.someLine()
		return []stmt{{w.sql("DELETE FROM order_lines WHERE order_id = $1 AND line = $2"), []any{o, l}}}
	case k < 77: // a line's key changed
		o, l := w.someLine()
		return []stmt{{w.sql("UPDATE order_lines SET line = line + 100000 WHERE order_id = $1 AND line = $2"), []any{o, l}}}
	case k < 84: // an account deleted and inserted again with the same key
		id := 1 + r.Int64N(followAccounts)
		return []stmt{{w.sql("DELETE FROM %A WHERE id = $1"), []any{id}}, w.insertAccount(id)}
	case k < 89: // a line deleted and inserted again with the same key
		o, l := w.someLine()
		return []stmt{{w.sql("DELETE FROM order_lines WHERE order_id = $1 AND line = $2"), []any{o, l}}, w.insertLine(o, l)}
	default: // several statements: an account's balance, lines' quantities, a new line
		o, l := w.someLine()
		s := []stmt{
			w.updateBalance(w.someAccount(true)),
			{w.sql("UPDATE order_lines SET qty = qty + 1 WHERE order_id = $1 AND line = $2"), []any{o, l}},
			{w.sql("UPDATE order_lines SET qty = $1, sku = $2 WHERE order_id = $3"), []any{1 + r.Int64N(99), fmt.Sprintf("SKU-%d", r.IntN(100000)), 1 + r.Int64N(followOrders)}},
		}
		if w.nextOrder > 1_000_000 {
			s = append(s, w.insertLine(w.nextOrder, 10+r.Int64N(1000)))
		}
		return s
	}
}

// sql spells q for the source's engine: %A is the accounts table, $i the
// i-th parameter.
func (w *writer) sql(q string) string {
	q = strings.ReplaceAll(q, "%A", w.e.src.quote("Accounts"))
	if w.e.src == mysqlEngine {
		for i := 9; i >= 1; i-- {
			q = strings.ReplaceAll(q, "$"+strconv.Itoa(i), "?")
		}
	}
	return q
}

// someAccount is an account id, likely to exist; with large, a seeded
// account with a large note half the time.
func (w *writer) someAccount(large bool) int64 {
	if large && w.rng.IntN(2) == 0 {
		return 5 * (1 + w.rng.Int64N(followAccounts/5))
	}
	return 1 + w.rng.Int64N(w.accounts)
}

// someLine is a seeded line's key.
func (w *writer) someLine() (int64, int64) {
	return 1 + w.rng.Int64N(followOrders), 1 + w.rng.Int64N(followLines)
}

// note is an account's note: a large one (4-8 kB of hex, which does not
// compress) a fifth of the time, NULL a tenth.
func (w *writer) note() any {
	switch k := w.rng.IntN(10); {
	case k < 2:
		var b strings.Builder
		for n := 4000 + w.rng.IntN(4000); b.Len() < n; {
			fmt.Fprintf(&b, "%016x", w.rng.Uint64())
		}
		return b.String()
	case k < 3:
		return nil
	default:
		return fmt.Sprintf("note %d", w.rng.IntN(1000000))
	}
}

func (w *writer) balance() string {
	return fmt.Sprintf("%d.%02d", w.rng.IntN(1000000), w.rng.IntN(100))
}

func (w *writer) status() string {
	if w.rng.IntN(5) == 0 {
		return "closed"
	}
	return "active"
}

// insertAccount inserts an account, id 0 from the identity.
func (w *writer) insertAccount(id int64) stmt {
	email := fmt.Sprintf("w%d@example.org", w.rng.IntN(1000000000))
	cast := "$2::numeric, $3::account_status"
	if w.e.src == mysqlEngine {
		cast = "$2, $3"
	}
	if id == 0 {
		return stmt{w.sql("INSERT INTO %A (email, balance, status, note) VALUES ($1, " + cast + ", $4)"),
			[]any{email, w.balance(), w.status(), w.note()}}
	}
	return stmt{w.sql("INSERT INTO %A (email, balance, status, note, id) VALUES ($1, " + cast + ", $4, $5)"),
		[]any{email, w.balance(), w.status(), w.note(), id}}
}

// updateBalance changes an account's balance and status, and its
// updated_at half the time, never its note.
func (w *writer) updateBalance(id int64) stmt {
	set := "balance = $1::numeric, status = $2::account_status"
	now := "localtimestamp(0)"
	if w.e.src == mysqlEngine {
		set, now = "balance = $1, status = $2", "CURRENT_TIMESTAMP"
	}
	if w.rng.IntN(2) == 0 {
		set += ", updated_at = " + now
	}
	return stmt{w.sql("UPDATE %A SET " + set + " WHERE id = $3"), []any{w.balance(), w.status(), id}}
}

func (w *writer) updateNote(id int64) stmt {
	return stmt{w.sql("UPDATE %A SET note = $1 WHERE id = $2"), []any{w.note(), id}}
}

func (w *writer) insertLine(order, line int64) stmt {
	return stmt{w.sql("INSERT INTO order_lines (order_id, line, qty, sku) VALUES ($1, $2, $3, $4)"),
		[]any{order, line, 1 + w.rng.Int64N(99), fmt.Sprintf("SKU-%d", w.rng.IntN(100000))}}
}

// followRow is one row of a canonical dump: its integer key and every
// column's text (nil: NULL).
type followRow struct {
	key  []int64
	vals []*string
}

// canonicalDump reads every row of table in db (of engine eng) ordered by
// its integer key, each column cast to text in SQL in a form both engines
// agree on: numeric(12,2) with its two decimals, timestamps at second
// precision as 'YYYY-MM-DD HH:MM:SS' (PostgreSQL's own text form follows
// the DateStyle the test's databases set, so it is spelled out).
func canonicalDump(t *testing.T, eng *engine, db *sql.DB, table string, key, cols []string) []followRow {
	t.Helper()
	exprs := make([]string, len(cols))
	for i, c := range cols {
		switch {
		case eng == mysqlEngine:
			exprs[i] = "CAST(" + eng.quote(c) + " AS CHAR)"
		case c == "updated_at":
			exprs[i] = "to_char(" + eng.quote(c) + ", 'YYYY-MM-DD HH24:MI:SS')"
		default:
			exprs[i] = eng.quote(c) + "::text"
		}
	}
	// The key qualified: PostgreSQL would order by an output column of
	// the same name (the key as text) before the table's.
	var order []string
	for _, k := range key {
		order = append(order, "d."+eng.quote(k))
	}
	q := "SELECT " + strings.Join(exprs, ", ") + " FROM " + eng.quote(table) + " d ORDER BY " + strings.Join(order, ", ")
	rows, err := db.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []followRow
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		r := followRow{vals: make([]*string, len(cols))}
		for i, v := range vals {
			if v.Valid {
				r.vals[i] = &v.String
			}
		}
		for i := range key { // the key columns come first in cols
			n, err := strconv.ParseInt(*r.vals[i], 10, 64)
			if err != nil {
				t.Fatalf("%s: key %q: %v", table, *r.vals[i], err)
			}
			r.key = append(r.key, n)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameDump compares table in e's source and target by canonicalDump, row
// for row, and reports the first differences.
func sameDump(t *testing.T, e *env, table string, key, cols []string) {
	t.Helper()
	src := canonicalDump(t, e.src, e.srcDB, table, key, cols)
	dst := canonicalDump(t, e.dst, e.dstDB, table, key, cols)
	show := func(v *string) string {
		if v == nil {
			return "NULL"
		}
		if len(*v) > 48 {
			return fmt.Sprintf("%q…(%d bytes)", (*v)[:40], len(*v))
		}
		return strconv.Quote(*v)
	}
	showRow := func(r followRow) string {
		s := make([]string, len(r.vals))
		for i, v := range r.vals {
			s[i] = cols[i] + "=" + show(v)
		}
		return strings.Join(s, " ")
	}
	var diffs []string
	missing, extra, differ := 0, 0, 0
	i, j := 0, 0
	for i < len(src) || j < len(dst) {
		c := 0
		switch {
		case i == len(src):
			c = 1
		case j == len(dst):
			c = -1
		default:
			c = slices.Compare(src[i].key, dst[j].key)
		}
		switch c {
		case -1:
			missing++
			diffs = append(diffs, fmt.Sprintf("missing in the target: %s", showRow(src[i])))
			i++
		case 1:
			extra++
			diffs = append(diffs, fmt.Sprintf("extra in the target:   %s", showRow(dst[j])))
			j++
		default:
			var cs []string
			for k := range cols {
				a, b := src[i].vals[k], dst[j].vals[k]
				if (a == nil) != (b == nil) || (a != nil && *a != *b) {
					cs = append(cs, fmt.Sprintf("%s: source %s, target %s", cols[k], show(a), show(b)))
				}
			}
			if len(cs) > 0 {
				differ++
				diffs = append(diffs, fmt.Sprintf("key %v differs: %s", src[i].key, strings.Join(cs, "; ")))
			}
			i, j = i+1, j+1
		}
	}
	if len(diffs) == 0 {
		t.Logf("%s: source and target equal, %d rows", table, len(src))
		return
	}
	t.Errorf("%s (%s→%s): source %d rows, target %d: %d missing in the target, %d extra, %d differing; the first:\n%s",
		table, e.src.name, e.dst.name, len(src), len(dst), missing, extra, differ, strings.Join(diffs[:min(len(diffs), 15)], "\n"))
}
