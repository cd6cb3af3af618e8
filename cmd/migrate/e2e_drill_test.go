package main_test

// End-to-end tests of `migrate drill` (SPEC §8): every kind runs against real
// PostgreSQL, MariaDB and Redis on a small table with a 2-3s lease TTL and
// must pass its criteria. Besides the drill's own verdict, each test checks
// the target by SQL: every row carries the token of the instance that owned
// its key range, and the old holder committed nothing past the takeover.

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/drill"
)

const drillRows = 30000

// drillEnv seeds a fresh PostgreSQL source table of drillRows rows and
// writes a plan with the given TTL into a target of engine dst.
func drillEnv(t *testing.T, ttl string, dst *engine, shards int) (*env, string) {
	t.Helper()
	e := newEnv(t, pgEngine, dst)
	e.leaseTTL = ttl
	seedBig(t, e, "big", drillRows)
	return e, e.plan(t, planTable{name: "big", key: []string{"id"}, shards: shards})
}

// runDrill runs `migrate drill -p plan kind --json` (slowed holder) and
// decodes its report, checking the JSON keys scripts rely on.
func runDrill(t *testing.T, plan, kind string, extra ...string) (result, drill.Result) {
	t.Helper()
	args := append([]string{"drill", "-p", plan, kind, "--json", "--holder-latency", "20ms"}, extra...)
	r := runMigrate(t, args...)
	var raw map[string]any
	decodeJSON(t, r, &raw)
	requireKeys(t, "drill --json", raw, "plan", "pass", "drills")
	for i, d := range requireList(t, "drill --json", raw, "drills") {
		requireKeys(t, fmt.Sprintf("drills[%d]", i), d, "kind", "ttl_ms", "batch_size", "instances", "takeovers", "rto_ms",
			"predicted_rto_ms", "replayed_rows", "replayed_batches", "stale_rejections", "stale_writes_accepted", "shards",
			"history", "verify", "checks", "pass")
	}
	var res drill.Result
	decodeJSON(t, r, &res)
	for _, d := range res.Drills {
		t.Logf("%s%s: pass %v, rto %dms (predicted %dms), handover seen after %dms, replayed %d rows, stale rejected %d, accepted %d, fault at %d rows for %dms",
			d.Kind, map[string]string{"": "", "on": " (persistent)", "off": " (volatile)"}[d.Persistence], d.Pass, d.RtoMs, d.PredictedRtoMs,
			d.HandoverMs, d.ReplayedRows, d.StaleRejections, d.StaleWritesAccepted, d.FaultAtRows, d.FaultMs)
	}
	return r, res
}

// wantPass fails unless the drill exited 0 and every drill passed.
func wantPass(t *testing.T, r result, res drill.Result) {
	t.Helper()
	ok := r.code == 0 && res.Pass && len(res.Drills) > 0
	for _, d := range res.Drills {
		ok = ok && d.Pass && d.Error == "" && d.Verify != nil && d.Verify.Equal && d.StaleWritesAccepted == 0
		for _, c := range d.Checks {
			ok = ok && c.Pass
		}
	}
	if !ok {
		t.Fatalf("drill did not pass:\n%s", r)
	}
}

// handedOver checks one shard handed from the holder to one takeover: the
// takeover's token is above the holder's, it replayed at most one batch, and
// in the target every row up to the resume key carries the holder's token
// and every row after it the successor's — so the holder committed nothing
// after the takeover and nothing older survives past the resume point.
func handedOver(t *testing.T, e *env, d drill.Report, shard int) {
	t.Helper()
	var tk *drill.Takeover
	for i := range d.Takeovers {
		if d.Takeovers[i].Shard == shard {
			if tk != nil {
				t.Fatalf("shard %d taken over twice: %+v", shard, d.Takeovers)
			}
			tk = &d.Takeovers[i]
		}
	}
	if tk == nil {
		t.Fatalf("no takeover of shard %d: %+v", shard, d.Takeovers)
	}
	holder := d.Instances[0]
	var holderTok int64
	for _, s := range d.Shards {
		if s.Shard == shard {
			holderTok = s.HolderToken
		}
	}
	if tk.Token <= holderTok || tk.PreviousToken != holderTok || !strings.HasPrefix(tk.PreviousOwner, "drill-a-") || tk.PreviousOwner != holder.Owner {
		t.Errorf("takeover %+v of a shard the holder %s held with token %d", tk.Takeover, holder.Owner, holderTok)
	}
	if want := e.predictedRtoMs(d.TTLMs); tk.ReplayedRows > int64(d.BatchSize) || tk.RtoMs <= 0 || tk.PredictedRtoMs != want {
		t.Errorf("takeover replayed %d rows (batch %d), rto %dms, predicted %dms (want %dms)",
			tk.ReplayedRows, d.BatchSize, tk.RtoMs, tk.PredictedRtoMs, want)
	}
	resume := int64(0)
	if tk.ResumeKey != "" {
		resume = keyInt(t, tk.ResumeKey)
	}
	lo, hi := shardRange(t, e, shard)
	ph := []string{e.dst.ph(1), e.dst.ph(2), e.dst.ph(3), e.dst.ph(4)}
	before := queryInt(t, e.dstDB, `SELECT count(*) FROM big WHERE id > `+ph[0]+` AND id <= `+ph[1]+` AND id <= `+ph[2]+` AND _fence <> `+ph[3], lo, hi, resume, holderTok)
	after := queryInt(t, e.dstDB, `SELECT count(*) FROM big WHERE id > `+ph[0]+` AND id <= `+ph[1]+` AND id > `+ph[2]+` AND _fence <> `+ph[3], lo, hi, resume, tk.Token)
	if before != 0 || after != 0 {
		t.Errorf("shard %d: %d rows up to the resume key %d without the holder's token %d, %d after it without the successor's token %d",
			shard, before, resume, holderTok, after, tk.Token)
	}
	mine := int64(-1)
	for _, s := range d.Shards {
		if s.Shard == shard {
			mine = s.HolderRows
		}
	}
	if mine >= 0 { // it printed a report: what it says it committed must all be before the resume key
		// It may report fewer: a commit whose reply the pause or the cut
		// swallowed counts as failed on its side, yet came before the
		// successor's claim (which waited for it). More would be rows the
		// successor has overwritten since: stale writes accepted.
		held := queryInt(t, e.dstDB, `SELECT count(*) FROM big WHERE id > `+ph[0]+` AND id <= `+ph[1]+` AND _fence = `+ph[2], lo, hi, holderTok)
		if mine > held {
			t.Errorf("shard %d: the holder reports %d rows committed, the target keeps %d with its token: %d were written after the takeover",
				shard, mine, held, mine-held)
		}
	}
}

// shardRange returns a shard's (lo, hi] on id, open ends as the whole table.
func shardRange(t *testing.T, e *env, shard int) (lo, hi int64) {
	t.Helper()
	var los, his sql.NullString
	q := `SELECT lo_key, hi_key FROM _migrate_checkpoint WHERE plan = ` + e.dst.ph(1) + ` AND shard = ` + e.dst.ph(2)
	if err := e.dstDB.QueryRowContext(t.Context(), q, e.name, shard).Scan(&los, &his); err != nil {
		t.Fatalf("checkpoint of shard %d: %v", shard, err)
	}
	lo, hi = -1, 1<<62
	if los.Valid {
		lo = keyInt(t, los.String)
	}
	if his.Valid {
		hi = keyInt(t, his.String)
	}
	return lo, hi
}

// keyInt decodes a one-part integer key as the checkpoint stores it.
func keyInt(t *testing.T, s string) int64 {
	t.Helper()
	k, err := cursor.DecodeKey(s)
	if err != nil || len(k) != 1 {
		t.Fatalf("key %q: %v", s, err)
	}
	n, err := strconv.ParseInt(fmt.Sprint(k[0]), 10, 64)
	if err != nil {
		t.Fatalf("key %q: %v", s, err)
	}
	return n
}

// wantExit checks the holder's and the standbys' exit codes.
func wantExits(t *testing.T, d drill.Report, holder int) {
	t.Helper()
	if h := d.Instances[0]; h.Role != "holder" || h.Exit != holder {
		t.Errorf("holder %s exit %d, want %d", h.Name, h.Exit, holder)
	}
	for _, s := range d.Instances[1:] {
		if s.Role != "standby" || s.Exit != 0 {
			t.Errorf("standby %s exit %d, want 0", s.Name, s.Exit)
		}
	}
}

// The drills run from PostgreSQL, the kill into either target engine, the
// other kinds into PostgreSQL: the same faults without the drill run in
// every engine pair (TestTakeover_FrozenHolderRefused, TestRun_ConnectionResets,
// TestRun_FlushallRedis_L4, TestMySQL_ClientFoundRowsL4).
func TestDrill_Kill(t *testing.T) {
	t.Parallel()
	for _, dst := range []*engine{pgEngine, mysqlEngine} {
		t.Run(dst.name, func(t *testing.T) {
			t.Parallel()
			e, plan := drillEnv(t, "2s", dst, 1)
			r, res := runDrill(t, plan, "kill")
			wantPass(t, r, res)
			d := res.Drills[0]
			wantExits(t, d, -1)
			if !d.Instances[0].Killed || len(d.Takeovers) != 1 {
				t.Errorf("holder %+v, takeovers %+v: want it killed and one takeover", d.Instances[0], d.Takeovers)
			}
			handedOver(t, e, d, 0)
			assertDrillRows(t, e)
		})
	}
}

// assertDrillRows compares the tables by SQL.
func assertDrillRows(t *testing.T, e *env) {
	t.Helper()
	assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, drillRows)
}

// TestDrill_Fenced: the holder is stopped (SIGSTOP), cut off from Redis and
// the target, or has its writes held back by the proxy, past the TTL; a
// standby takes over, and the holder, back, exits 4 having written nothing
// after the takeover.
func TestDrill_Fenced(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"pause", "partition", "late-write"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e, plan := drillEnv(t, "2s", pgEngine, 1)
			r, res := runDrill(t, plan, kind)
			wantPass(t, r, res)
			d := res.Drills[0]
			wantExits(t, d, 4)
			if d.FaultMs < d.TTLMs {
				t.Errorf("the fault lasted %dms, want at least the TTL %dms", d.FaultMs, d.TTLMs)
			}
			handedOver(t, e, d, 0)
			if kind == "late-write" {
				if l := d.LateWrite; l == nil || l.HeldBytes == 0 || l.HeldMs < d.TTLMs || l.DeliveredAfterTakeoverMs < 0 {
					t.Errorf("late write %+v: want bytes held past the TTL %dms and delivered after the takeover", l, d.TTLMs)
				}
			}
			assertDrillRows(t, e)
		})
	}
}

// TestDrill_ShortPause: SIGSTOP shorter than TTL - renew interval - margin
// causes no takeover: the holder finishes, the standby only sees it done.
func TestDrill_ShortPause(t *testing.T) {
	t.Parallel()
	e, plan := drillEnv(t, "3s", pgEngine, 1)
	r, res := runDrill(t, plan, "short-pause")
	wantPass(t, r, res)
	d := res.Drills[0]
	wantExits(t, d, 0)
	if d.FaultMs <= 0 || d.FaultMs >= d.TTLMs-d.TTLMs/3-d.TTLMs/10 {
		t.Errorf("paused %dms, want below TTL - TTL/3 - TTL/10", d.FaultMs)
	}
	if len(d.Takeovers) != 0 || d.Instances[0].Takeovers != 0 || d.Instances[1].Takeovers != 0 || d.HandoverMs != 0 {
		t.Errorf("takeovers %+v, handover %dms: want none", d.Takeovers, d.HandoverMs)
	}
	if d.Instances[0].RowsWritten != drillRows || d.Instances[1].RowsWritten != 0 {
		t.Errorf("holder wrote %d rows, standby %d: want all by the holder", d.Instances[0].RowsWritten, d.Instances[1].RowsWritten)
	}
	tok := d.Shards[0].HolderToken
	if n := queryInt(t, e.dstDB, `SELECT count(*) FROM big WHERE _fence <> $1`, tok); n != 0 {
		t.Errorf("%d rows carry another token than the holder's %d", n, tok)
	}
	assertDrillRows(t, e)

	// The plan has run: a second drill refuses it until --reset.
	r = runMigrate(t, "drill", "-p", plan, "kill", "--json")
	wantCode(t, r, 2)
	var raw map[string]any
	decodeJSON(t, r, &raw)
	if msg, _ := raw["error"].(string); !strings.Contains(msg, "--reset") || !strings.Contains(r.stderr, "--reset") || raw["pass"] != false {
		t.Errorf("a drill on a used target: want exit 2 naming --reset\n%s", r)
	}
	if n := queryInt(t, e.dstDB, `SELECT count(*) FROM big`); n != drillRows {
		t.Errorf("the refused drill changed the target: %d rows", n)
	}

	// --reset starts it over: target table, checkpoints, watermarks and Redis
	// keys go, so the new holder starts from nothing and is not taken for a
	// successor of the last run's.
	r, res = runDrill(t, plan, "kill", "--reset")
	wantPass(t, r, res)
	d = res.Drills[0]
	if d.Shards[0].HolderToken != 1 || d.FaultAtRows >= drillRows {
		t.Errorf("after --reset: holder token %d, want 1 (the plan's fencing counter deleted with its watermark); fault at %d rows",
			d.Shards[0].HolderToken, d.FaultAtRows)
	}
	handedOver(t, e, d, 0)
	assertDrillRows(t, e)
}

// TestDrill_RedisRestart: Redis is killed and restarted mid-copy, without
// and with persistence. Without, Redis forgot its fencing counter: the run
// must still end with a token above the target's watermark (L4), held by
// the one instance that finished the shard. How the holder ends is a race
// the drill does not set: it learns its lease is gone at its next renewal
// and looks for a successor in the target. If a standby's claim is there,
// it is fenced (exit 4); if not, it takes the shard again, and either
// finishes it (exit 0) or, the standby having got the lease first, waits
// behind it and finds the shard done (exit 0). Under CPU load, 10 runs
// ended 5 times each way with a standby finishing; the test used to want
// exit 4 always. With persistence, the lease survives.
func TestDrill_RedisRestart(t *testing.T) {
	t.Parallel()
	e, plan := drillEnv(t, "2s", pgEngine, 1)
	r, res := runDrill(t, plan, "redis-restart")
	wantPass(t, r, res)
	if len(res.Drills) != 2 || res.Drills[0].Persistence != "off" || res.Drills[1].Persistence != "on" {
		t.Fatalf("want two drills, without then with persistence\n%s", r)
	}
	for _, d := range res.Drills {
		s := d.Shards[0]
		if d.Persistence == "off" {
			var finished []string
			fin := -1
			for i, in := range d.Instances {
				for _, sh := range in.Shards {
					if sh.Shard == 0 && sh.State == "done" && !sh.ByOther {
						finished, fin = append(finished, fmt.Sprintf("%s (token %d)", in.Name, sh.Token)), i
						if sh.Token != s.FinalToken {
							t.Errorf("volatile Redis: %s finished the shard with token %d, the checkpoint ends with %d", in.Name, sh.Token, s.FinalToken)
						}
					}
				}
			}
			h := d.Instances[0]
			var byOther bool
			for _, sh := range h.Shards {
				byOther = byOther || sh.Shard == 0 && sh.ByOther
			}
			exitOK := h.Exit == 4 || h.Exit == 0 && byOther // fenced, or it found the shard done by the standby
			if fin == 0 {
				exitOK = h.Exit == 0 // it took the shard again first and finished it
			}
			if len(finished) != 1 || s.FinalToken <= s.HolderToken || !exitOK {
				t.Errorf("volatile Redis: shard finished by %v, final token %d after the holder's %d, holder exit %d (shards %+v): "+
					"want one instance to finish it with a token above the watermark; the holder exiting 0 if it is that instance, "+
					"else 4 (fenced) or 0 with the shard done by another",
					finished, s.FinalToken, s.HolderToken, h.Exit, h.Shards)
			}
			t.Logf("volatile Redis: shard finished by %v; holder exit %d, shard done by another %v", finished, h.Exit, byOther)
		}
		if d.Persistence == "on" && s.FinalToken < s.HolderToken {
			t.Errorf("persistent Redis: final token %d below the holder's %d", s.FinalToken, s.HolderToken)
		}
	}
	w, owner := e.fence(t, "big", 0)
	if last := res.Drills[1].Shards[0]; w != last.FinalToken {
		t.Errorf("watermark %d of %s, want the final token %d", w, owner, last.FinalToken)
	}
	assertDrillRows(t, e)
}

// TestDrill_TwoStandbys: with two standbys and two shards, a killed holder's
// shards are each taken over by exactly one standby; over the whole run each
// shard's lease and watermark tokens only grow and no token ever has two
// owners (the drill samples them every TTL/20).
func TestDrill_TwoStandbys(t *testing.T) {
	t.Parallel()
	e, plan := drillEnv(t, "2s", pgEngine, 2)
	// The standbys start once the holder has committed its first rows,
	// and the drill needs them waiting before it kills the holder. At
	// 20ms per round trip the holder copies both shards' 30,000 rows in
	// about 4s, which two processes starting side by side on a busy
	// machine took longer than (a standby found the copy done and exited
	// 0, 3 runs of 3); at 100ms it takes about five times as long, past
	// the 10s the drill gives the standbys to start.
	r, res := runDrill(t, plan, "kill", "--standbys", "2", "--holder-latency", "100ms")
	wantPass(t, r, res)
	d := res.Drills[0]
	if len(d.Instances) != 3 || len(d.Shards) != 2 {
		t.Fatalf("instances %+v shards %+v: want a holder, two standbys, two shards", d.Instances, d.Shards)
	}
	wantExits(t, d, -1)
	for shard := range 2 {
		handedOver(t, e, d, shard)
		// Exactly one standby worked on the shard; the other saw it done.
		var workers []string
		for _, in := range d.Instances[1:] {
			for _, s := range in.Shards {
				if s.Shard == shard && !s.ByOther {
					workers = append(workers, fmt.Sprintf("%s (token %d, %s)", in.Name, s.Token, s.State))
				}
			}
		}
		if len(workers) != 1 {
			t.Errorf("shard %d held by %v, want exactly one standby", shard, workers)
		}
	}
	owners := map[string]string{}
	last := map[string]int64{}
	claims := map[int]int{}
	for _, ev := range d.History {
		if ev.Owner == "" {
			continue
		}
		if ev.Kind == "fence" {
			claims[ev.Shard]++
		}
		k := fmt.Sprintf("%s %s#%d", ev.Kind, ev.Table, ev.Shard)
		tk := fmt.Sprintf("%s token %d", k, ev.Token)
		if o, ok := owners[tk]; ok && o != ev.Owner {
			t.Errorf("%s held by %s and %s", tk, o, ev.Owner)
		}
		if ev.Token < last[k] {
			t.Errorf("%s went from token %d to %d", k, last[k], ev.Token)
		}
		owners[tk], last[k] = ev.Owner, max(last[k], ev.Token)
	}
	if claims[0] < 2 || claims[1] < 2 { // per shard: the holder's watermark, then the successor's
		t.Errorf("watermark claims seen per shard %v, want the holder's and a successor's\n%+v", claims, d.History)
	}
	assertDrillRows(t, e)
}
