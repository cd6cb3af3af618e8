package main_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// TestRun_StaleHolderFenced: a newer holder raises the watermark while the
// holder copies; its next batch is refused (exit 4) and nothing it wrote
// after the raise is committed. PostgreSQL to PostgreSQL only: it is the
// conformance suite's stale_token_rejected, which runs in every pair, on a
// larger table.
func TestRun_StaleHolderFenced(t *testing.T) {
	t.Parallel()
	inDirections(t, []direction{pgToPG}, func(t *testing.T, e *env) {
		const n = 300000
		e.batchSize = 500
		seedBig(t, e, "big", n)
		// The holder waits at the first row of the batch past n/2, its fence
		// check done: the raise comes while it copies, however fast it copies.
		g := e.gateBig(t, fmt.Sprintf("NEW.id > %d", n/2))
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 1})

		p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "holder")
		g.waitHeld(t, p, 1)
		tok, _ := e.fence(t, "big", 0)

		// A newer holder raises the watermark. The UPDATE waits for the holder's
		// batch in flight (it holds the watermark row locked); the checkpoint read
		// in the same transaction then sees every batch committed before the raise.
		doneAtRaise := g.raise(t, e.name, "big")
		if doneAtRaise < n/2 || doneAtRaise >= n {
			t.Errorf("%d rows done at the raise, want the %d before the gate and at most the batches let through before it", doneAtRaise, n/2)
		}

		r := p.wait(t)
		wantCode(t, r, 4)
		var rep runReport
		decodeJSON(t, r, &rep)
		if rep.StaleRejections < 1 {
			t.Errorf("stale_rejections %d, want at least 1", rep.StaleRejections)
		}
		t.Logf("fenced after %v: %d rows done at the raise, stale_rejections %d", r.elapsed.Round(time.Millisecond), doneAtRaise, rep.StaleRejections)

		// Nothing was committed after the raise.
		cp := e.checkpoint(t, "big", 0)
		if cp.rowsDone != doneAtRaise || cp.state == "done" || cp.token != tok {
			t.Errorf("checkpoint %+v after the refusal, want %d rows by token %d, not done", cp, doneAtRaise, tok)
		}
		if got := queryInt(t, e.dstDB, `SELECT count(*) FROM big`); got != doneAtRaise {
			t.Errorf("target holds %d rows, want the %d committed before the raise", got, doneAtRaise)
		}
		if got := queryInt(t, e.dstDB, "SELECT count(*) FROM big WHERE _fence <> "+e.dst.ph(1), tok); got != 0 {
			t.Errorf("%d target rows carry a token other than the holder's %d", got, tok)
		}
		if w, owner := e.fence(t, "big", 0); w != tok+1000 || owner != "intruder" {
			t.Errorf("watermark %d of %q, want %d of intruder (the refused holder must not touch it)", w, owner, tok+1000)
		}
	})
}

// statusOf runs `status --json` and decodes it, checking the keys of SPEC §4.
func statusOf(t *testing.T, plan string) (tables, leases []map[string]any) {
	t.Helper()
	r := runMigrate(t, "status", "-p", plan, "--json")
	wantCode(t, r, 0)
	var raw map[string]any
	decodeJSON(t, r, &raw)
	requireKeys(t, "status --json", raw, "plan", "tables", "leases")
	for i, tb := range requireList(t, "status --json", raw, "tables") {
		tables = append(tables, requireKeys(t, fmt.Sprintf("tables[%d]", i), tb, "table", "shard", "state", "rows_done", "last_key", "token", "updated_at"))
	}
	for i, l := range requireList(t, "status --json", raw, "leases") {
		leases = append(leases, requireKeys(t, fmt.Sprintf("leases[%d]", i), l, "table", "shard", "owner", "token", "ttl_ms"))
	}
	return tables, leases
}

func TestStatus_JSON(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		const n = 100000
		e.batchSize, e.leaseTTL = 500, "5s"
		seedBig(t, e, "big", n)
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})

		if tables, leases := statusOf(t, plan); len(tables) != 0 || len(leases) != 0 {
			t.Errorf("before any run: tables %v leases %v, want none", tables, leases)
		}

		// The holder's first batch waits at a gate with the lease held:
		// status sees it running, however fast the copy would be. (A
		// source table locked against reads would stop it earlier, at
		// setup, which reads the table's definition.)
		g := e.gateBig(t, "NEW.id > 0")
		p := startMigrate(t, "run", "-p", plan, "--instance", "probe")
		var tables, leases []map[string]any
		poll(t, 60*time.Second, "a lease in status --json", func() bool {
			select {
			case <-p.done:
				t.Fatalf("the run ended before status saw its lease:\n%s", p.wait(t))
			default:
			}
			tables, leases = statusOf(t, plan)
			return len(leases) > 0
		})
		l := leases[0]
		if owner, _ := l["owner"].(string); !strings.HasPrefix(owner, "probe-") || len(owner) < len("probe-")+32 {
			t.Errorf("lease owner %q, want probe-<128 random bits>", owner)
		}
		if ttl, _ := l["ttl_ms"].(float64); ttl <= 0 || ttl > 5000 {
			t.Errorf("lease ttl_ms %v, want in (0, 5000]", l["ttl_ms"])
		}
		if tok, _ := l["token"].(float64); tok < 1 || l["table"] != "big" || l["shard"] != float64(0) {
			t.Errorf("lease %v, want big#0 with a token", l)
		}
		if len(tables) != 1 || (tables[0]["state"] != "running" && tables[0]["state"] != "pending") {
			t.Errorf("tables while running: %v", tables)
		}

		g.openAll(t)
		wantCode(t, p.wait(t), 0)
		tables, leases = statusOf(t, plan)
		if len(leases) != 0 {
			t.Errorf("leases after the run: %v, want none (released)", leases)
		}
		if len(tables) != 1 {
			t.Fatalf("tables after the run: %v", tables)
		}
		s := tables[0]
		if s["table"] != "big" || s["shard"] != float64(0) || s["state"] != "done" || s["rows_done"] != float64(n) || fmt.Sprint(s["last_key"]) != fmt.Sprint(n) {
			t.Errorf("shard status %v, want big#0 done, %d rows, last_key %d", s, n, n)
		}
		if tok, _ := s["token"].(float64); tok < 1 {
			t.Errorf("shard token %v", s["token"])
		}
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(s["updated_at"])); err != nil {
			t.Errorf("updated_at: %v", err)
		}
		r := runMigrate(t, "status", "-p", plan)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "done") || !strings.Contains(r.stdout, "leases: none held") {
			t.Errorf("status text:\n%s", r)
		}
	})
}

// TestRun_FlushallRedis_L4: Redis restarts without persistence mid-run, so
// its fencing counter starts again from zero; the target's watermark, not
// Redis, decides, and the next run's token must end up above it (SPEC §5 L4).
func TestRun_FlushallRedis_L4(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		rs := testsvc.StartRedis(t, false)
		const n = 100000
		e.redisURL, e.leaseTTL = rs.URL, "2s"
		seedBig(t, e, "big", n)
		// The holder waits at the first row of the batch past n/2 when it is
		// killed: mid-run, however fast it copies.
		g := e.gateBig(t, fmt.Sprintf("NEW.id > %d", n/2))
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})

		p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "before")
		g.waitHeld(t, p, 1)
		p.kill(t)
		g.drop(t) // its batch at the gate ends with its connection, as a killed client's does
		g.openAll(t)
		w, _ := e.fence(t, "big", 0)
		before := e.checkpoint(t, "big", 0)
		rs.Restart() // no AOF, no RDB: the lease and the counter are gone

		r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "after")
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		tok, owner := e.fence(t, "big", 0)
		t.Logf("watermark before the Redis restart %d, after the run %d (owner %s); %d rows were done before", w, tok, owner, before.rowsDone)
		if tok <= w || !strings.HasPrefix(owner, "after-") {
			t.Errorf("watermark token %d of %q, want above %d, by the second run", tok, owner, w)
		}
		if len(rep.Shards) != 1 || rep.Shards[0].State != "done" || rep.Shards[0].Token != tok {
			t.Errorf("shards %+v, want big#0 done with token %d", rep.Shards, tok)
		}
		if rep.RowsWritten != n-before.rowsDone || rep.StaleRejections != 0 {
			t.Errorf("rows_written %d stale_rejections %d, want %d and 0", rep.RowsWritten, rep.StaleRejections, n-before.rowsDone)
		}
		// Redis forgot the lease, the target did not: still a takeover, from the
		// holder the fence row names.
		if len(rep.Takeovers) != 1 || !strings.HasPrefix(rep.Takeovers[0].PreviousOwner, "before-") ||
			rep.Takeovers[0].PreviousToken != w || rep.Takeovers[0].ReplayedRows != 0 {
			t.Errorf("takeovers %+v, want one from the killed holder with token %d", rep.Takeovers, w)
		}
		if cp := e.checkpoint(t, "big", 0); cp.state != "done" || cp.rowsDone != n || cp.token != tok {
			t.Errorf("checkpoint %+v, want done, %d rows, token %d", cp, n, tok)
		}
		if got := queryInt(t, e.dstDB, "SELECT count(*) FROM big WHERE id > "+e.dst.ph(1)+" AND _fence <> "+e.dst.ph(2), before.rowsDone, tok); got != 0 {
			t.Errorf("%d rows copied after the restart carry another token than %d", got, tok)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

// TestRun_TwoInstances runs the same plan twice at once: each shard is copied
// by exactly one of them, and both exit 0 once every shard is done (SPEC §4).
func TestRun_TwoInstances(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		const n = 100000
		e.batchSize, e.leaseTTL = 500, "5s"
		seedBig(t, e, "big", n)
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 4})
		e.createTarget(t, bigSpec("big"))
		w := e.countWrites(t, "big")

		a := startMigrate(t, "run", "-p", plan, "--json", "--instance", "a")
		b := startMigrate(t, "run", "-p", plan, "--json", "--instance", "b")
		var total, cut int64
		for _, p := range []*proc{a, b} {
			r := p.wait(t)
			wantCode(t, r, 0)
			cut += int64(strings.Count(r.stderr, "trying a smaller one"))
			var rep runReport
			decodeJSON(t, r, &rep)
			if len(rep.Shards) != 4 || rep.StaleRejections != 0 || len(rep.Takeovers) != 0 {
				t.Errorf("%v: shards %+v stale %d takeovers %+v, want 4 shards, no rejections, no takeovers",
					p.cmd.Args[1:], rep.Shards, rep.StaleRejections, rep.Takeovers)
			}
			for _, s := range rep.Shards {
				if s.State != "done" {
					t.Errorf("%v: shard %d state %q", p.cmd.Args[1:], s.Shard, s.State)
				}
			}
			total += rep.RowsWritten
			t.Logf("instance %s wrote %d rows in %v", p.cmd.Args[len(p.cmd.Args)-1], rep.RowsWritten, r.elapsed.Round(time.Millisecond))
		}
		if total != n {
			t.Errorf("the instances wrote %d rows together, want %d", total, n)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
		// Rolled-back attempts count too: at most a batch for each one the
		// lease's runway cut (logged; a stall of the machine).
		if writes := w.settled(t, n); writes < n || writes > n+cut*int64(e.batchSize) {
			t.Errorf("the target saw %d row writes, want %d and at most a batch more for each of the %d attempts the runway cut: no row is written twice without a crash", writes, n, cut)
		}
	})
}

// TestRun_SIGTERMReleasesLease stops a holder with SIGTERM: it rolls back,
// releases its lease at once (L3) instead of leaving it to expire, and the
// next run resumes without waiting for the TTL and without a takeover.
func TestRun_SIGTERMReleasesLease(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		const n = 200000
		e.leaseTTL = "30s"
		seedBig(t, e, "big", n)
		// SIGTERM comes while the holder's batch waits at the gate past n/2:
		// mid-copy, however fast it copies.
		g := e.gateBig(t, fmt.Sprintf("NEW.id > %d", n/2))
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})

		p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "term")
		g.waitHeld(t, p, 1)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		r := p.wait(t)
		g.openAll(t)
		t.Logf("after SIGTERM: exit %d in %v", r.code, r.elapsed.Round(time.Millisecond))
		// Neither done nor fenced: nobody took the lease and no token was refused.
		if r.code != 1 {
			t.Errorf("want exit 1 (error) after SIGTERM mid-copy, got %d: exit 4 would tell scripts the lease was lost\n%s", r.code, r)
		}
		if _, leases := statusOf(t, plan); len(leases) != 0 {
			t.Errorf("leases after SIGTERM: %v, want none", leases)
		}
		before := e.checkpoint(t, "big", 0)
		if before.rowsDone != n/2 {
			t.Errorf("checkpoint %+v after SIGTERM, want the %d rows before the gate: the batch in flight rolled back", before, n/2)
		}

		r = runMigrate(t, "run", "-p", plan, "--json", "--instance", "next")
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		// A lease left to expire would have made the next run stand by for the
		// TTL, then take over from the previous owner.
		if len(rep.Takeovers) != 0 || rep.RowsWritten != n-before.rowsDone {
			t.Errorf("takeovers %+v rows_written %d, want none and %d", rep.Takeovers, rep.RowsWritten, n-before.rowsDone)
		}
		if strings.Contains(r.stderr, "standby: lease held by another instance") {
			t.Errorf("the next run stood by: it waited for the lease\n%s", r.stderr)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

// TestRun_RedisDownFencesHolder: Redis stops (no persistence) under a
// holder. The holder stops committing within the TTL (it cannot renew);
// when Redis is back it takes the shard again — the target's watermark
// shows no successor — with a token above its old one (L4), and finishes.
// When Redis stays away longer than max_outage, it exits 4.
//
// "back" runs in both same-engine pairs (the holder's commits must stop at
// its lease on either target, and it claims its shard again there); "gone"
// in PostgreSQL to PostgreSQL only: past the same stop, exit 4 after
// max_outage is the lease's verdict, not the engines'.
func TestRun_RedisDownFencesHolder(t *testing.T) {
	for _, back := range []bool{true, false} {
		t.Run(map[bool]string{true: "back", false: "gone"}[back], func(t *testing.T) {
			t.Parallel()
			dirs := sameEngine
			if !back {
				dirs = []direction{pgToPG}
			}
			inDirections(t, dirs, func(t *testing.T, e *env) { redisDownFencesHolder(t, e, back) })
		})
	}
}

// redisDownFencesHolder is TestRun_RedisDownFencesHolder in e's direction.
func redisDownFencesHolder(t *testing.T, e *env, back bool) {
	rs := testsvc.StartRedis(t, false)
	const n, ttl = 500000, 2 * time.Second
	e.redisURL, e.leaseTTL, e.extra = rs.URL, ttl.String(), "max_outage: 4s\n"
	seedBig(t, e, "big", n)
	// Far ahead of where Redis stops, a gate keeps the copy from
	// ending before Redis is back, however fast it copies.
	g := e.gateBig(t, fmt.Sprintf("NEW.id > %d", n*3/4))
	plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 1})

	p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "cut")
	e.waitProgress(t, p, "big", n/10, n*3/4+1)
	before, _ := e.fence(t, "big", 0)
	stopped := time.Now()
	rs.Stop()
	time.Sleep(ttl + time.Second)
	var last time.Time
	if err := e.dstDB.QueryRowContext(t.Context(), "SELECT updated_at FROM _migrate_checkpoint WHERE plan = "+e.dst.ph(1), e.name).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if last.After(stopped.Add(ttl)) {
		t.Errorf("a batch committed %v after Redis stopped, past the lease TTL %v", last.Sub(stopped), ttl)
	}
	if cp := e.checkpoint(t, "big", 0); cp.state == "done" || cp.rowsDone >= n {
		t.Fatalf("checkpoint %+v: the copy finished without Redis", cp)
	}
	if !back {
		r := p.wait(t)
		wantCode(t, r, 4)
		t.Logf("Redis gone: exit 4 after %v", time.Since(stopped).Round(100*time.Millisecond))
		return
	}
	rs.Start()
	g.openAll(t)
	r := p.wait(t)
	wantCode(t, r, 0)
	after, owner := e.fence(t, "big", 0)
	t.Logf("Redis back after %v; the holder went on with token %d (was %d), done %v after the stop",
		ttl+time.Second, after, before, time.Since(stopped).Round(100*time.Millisecond))
	if after <= before || !strings.HasPrefix(owner, "cut-") || !strings.Contains(r.stderr, "taking the shard again") {
		t.Errorf("token %d of %s after, %d before: want the same holder with a higher token", after, owner, before)
	}
	assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
}
