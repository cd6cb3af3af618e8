package main_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// Setup killed at each of its steps, on both target engines (issue 12,
// item 7): after the target table's DDL and the helper tables, before any
// checkpoint; between two checkpoint inserts; at the last one. The test
// stops setup at the step by holding the lock its next statement needs,
// sees it wait there, SIGKILLs it and lets go. Running again must finish the
// copy: MySQL's setup used to insert each checkpoint in its own autocommit,
// so a kill between them left some shards without one, and every later run
// was refused (exit 2) until rows were deleted by hand.
func TestSetup_KilledAtEachStep(t *testing.T) {
	t.Parallel()
	steps := []struct {
		name  string
		shard int // the checkpoint insert to stop at; -1: the first statement on the checkpoints
	}{{"before_checkpoints", -1}, {"between_checkpoints", 1}, {"last_checkpoint", 2}}
	for _, dst := range []*engine{pgEngine, mysqlEngine} {
		for _, step := range steps {
			t.Run(dst.name+"/"+step.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, pgEngine, dst)
				// The helper tables exist, as on any target a plan has run on.
				seed := &table{name: "seed", key: []string{"id"}, cols: []col{{"id", "bigint", kNum}}, rows: [][]any{{int64(1)}}}
				seed.create(t, e.src, e.srcDB)
				name := e.name
				e.name += "_seed"
				wantCode(t, runMigrate(t, "run", "-p", e.plan(t, planTable{name: seed.name, key: seed.key})), 0)
				e.name = name

				const n = 3000
				tb := bigTable(n)
				tb.create(t, e.src, e.srcDB)
				plan := e.plan(t, planTable{name: tb.name, key: tb.key, shards: 3})
				release := blockSetup(t, e, tb.name, step.shard)
				p := startMigrate(t, "run", "-p", plan, "--instance", "killed")
				waitBlocked(t, e, p, "_migrate_checkpoint")
				p.kill(t)
				release()

				r := runMigrate(t, "run", "-p", plan, "--json")
				wantCode(t, r, 0)
				assertSameDump(t, e, tb, n)
				for shard := range 3 {
					if cp, ok := e.checkpointOf(t, tb.name, shard); !ok || cp.state != "done" {
						t.Errorf("shard %d: checkpoint %+v (found %v), want done", shard, cp, ok)
					}
				}
			})
		}
	}
}

// blockSetup holds, on a connection of its own, the lock that setup's
// statement on the checkpoints needs: the checkpoint row of shard (an
// uncommitted insert of it), or with shard < 0 the checkpoint table itself.
// The returned func lets go.
func blockSetup(t *testing.T, e *env, table string, shard int) func() {
	t.Helper()
	ctx := t.Context()
	conn, err := e.dstDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q := e.dst.quote("_migrate_checkpoint")
	var unlock string
	must := func(stmt string, args ...any) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	switch {
	case shard < 0 && e.dst == mysqlEngine:
		must("LOCK TABLES " + q + " WRITE")
		unlock = "UNLOCK TABLES"
	case shard < 0:
		must("BEGIN")
		must("LOCK TABLE " + q + " IN ACCESS EXCLUSIVE MODE")
		unlock = "ROLLBACK"
	default:
		must("BEGIN")
		must(fmt.Sprintf("INSERT INTO %s (plan, tbl, shard) VALUES (%s, %s, %s)", q, e.dst.ph(1), e.dst.ph(2), e.dst.ph(3)), e.name, table, shard)
		unlock = "ROLLBACK"
	}
	released := false
	release := func() {
		if !released {
			released = true
			_, err := conn.ExecContext(context.Background(), unlock)
			_ = conn.Close()
			if err != nil {
				t.Errorf("%s: %v", unlock, err)
			}
		}
	}
	t.Cleanup(release)
	return release
}

// waitBlocked waits until a session of the target's database other than
// the test's waits for a lock in a statement naming table (MySQL, where
// that needs the PROCESS privilege: has run such a statement for a second,
// which only a held lock makes it do here).
func waitBlocked(t *testing.T, e *env, p *proc, table string) {
	t.Helper()
	q := `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
  AND pid <> pg_backend_pid() AND strpos(query, $1) > 0`
	if e.dst == mysqlEngine {
		q = `SELECT count(*) FROM information_schema.processlist
WHERE db = DATABASE() AND id <> CONNECTION_ID() AND command IN ('Query', 'Execute') AND time >= 1 AND LOCATE(?, info) > 0`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int64
		if err := e.dstDB.QueryRowContext(t.Context(), q, table).Scan(&n); err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("migrate exited before setup was blocked:\n%s", p.wait(t))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("setup never waited on the held lock within 60s\n%s", p.stderr.String())
		}
	}
}

// Another instance's setup may hold the setup lock for longer than a
// statement may run (half the lease TTL). Instances started at once used to
// fail with exit 1 ("canceling statement due to statement timeout", seen in
// the soak with a 2s TTL); setup now tries the lock until it is granted.
func TestSetup_WaitsForAnotherSetup(t *testing.T) {
	t.Parallel()
	for _, dst := range []*engine{pgEngine, mysqlEngine} {
		t.Run(dst.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, pgEngine, dst)
			e.leaseTTL = "1s"
			tb := bigTable(100)
			tb.create(t, e.src, e.srcDB)
			plan := e.plan(t, planTable{name: tb.name, key: tb.key})
			conn, err := e.dstDB.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			lock, unlock := `SELECT pg_advisory_lock(hashtext($1))`, `SELECT pg_advisory_unlock(hashtext($1))`
			if e.dst == mysqlEngine {
				lock, unlock = `SELECT GET_LOCK(?, 10)`, `SELECT RELEASE_LOCK(?)`
			}
			name := "migrate:" + e.name
			if e.dst == mysqlEngine && len(name) > 64 {
				name = name[:64] // as the dialect cuts it
			}
			if _, err := conn.ExecContext(t.Context(), lock, name); err != nil {
				t.Fatal(err)
			}
			p := startMigrate(t, "run", "-p", plan)
			time.Sleep(2 * time.Second) // four statement timeouts of the instance's session
			if _, err := conn.ExecContext(t.Context(), unlock, name); err != nil {
				t.Fatal(err)
			}
			wantCode(t, p.wait(t), 0)
			assertSameDump(t, e, tb, 100)
		})
	}
}
