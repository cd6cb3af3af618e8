package main_test

// End-to-end tests of the stream drills: `migrate drill stream-kill` and
// `stream-pause` on PostgreSQL and MariaDB (each engine its own source and
// target), on a small table whose holder is slowed so that the copy may
// still run when the fault strikes. Whether it does is left to the
// machine's pace: the drill handles both, and so does the test. Besides the
// drill's verdict, the test checks the target against the source by its own
// canonical dump and the source for replication slots left behind.

import (
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/drill"
)

const streamDrillRows = 5000

func TestDrill_Stream(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"stream-kill", "stream-pause"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			inDirections(t, sameEngine, func(t *testing.T, e *env) {
				e.leaseTTL, e.batchSize = "2s", 200
				seedBig(t, e, "big", streamDrillRows)
				plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 1})
				abandonOnCleanup(t, e, plan)            // should the drill itself leave a slot
				r, res := runDrill(t, plan, kind, "-v") // the instances' logs, shown should it fail
				wantPass(t, r, res)
				if strings.Contains(r.stderr, "changed hands") {
					// Why the holder gave the stream up: its lines of the stream.
					for l := range strings.SplitSeq(r.stderr, "\n") {
						if strings.Contains(l, "changed hands") || strings.HasPrefix(l, "[drill-a]") && strings.Contains(l, "_stream") {
							t.Log(l)
						}
					}
				}
				var raw map[string]any
				decodeJSON(t, r, &raw)
				d0 := requireList(t, "drill --json", raw, "drills")[0].(map[string]any)
				st := requireKeys(t, "drills[0].stream", d0["stream"], "holder_token", "successor", "successor_token", "rto_ms", "handover_ms",
					"first_apply_ms", "pos_at_takeover", "resumed_from", "changes_after_takeover", "applied_changes", "replayed_changes",
					"stale_refused", "writer", "cutover", "slot_left")
				requireKeys(t, "drills[0].stream.writer", st["writer"], "transactions", "changes", "inserts", "updates", "deletes", "max_tx_changes", "failures")
				requireKeys(t, "drills[0].stream.cutover", st["cutover"], "source_pos", "applied_pos", "catch_up_ms", "verify_ms", "write_freeze_ms", "verify", "slot_dropped")
				checkStreamDrill(t, e, kind, res.Drills[0])
				if kind != "stream-kill" {
					return
				}
				// The plan has a stream now (stopped by the cutover): a
				// second drill is refused until --reset, which abandons
				// it and forgets its rows, so the next holder starts a
				// stream of its own.
				r = runMigrate(t, "drill", "-p", plan, kind, "--json")
				wantCode(t, r, 2)
				if !strings.Contains(r.stdout, "change stream") || !strings.Contains(r.stdout, "--reset") {
					t.Errorf("a second stream drill: want exit 2 naming the change stream and --reset\n%s", r)
				}
				r, res = runDrill(t, plan, kind, "--reset", "-v")
				wantPass(t, r, res)
				checkStreamDrill(t, e, kind, res.Drills[0])
			})
		})
	}
}

// checkStreamDrill checks a stream drill's report against what the test
// can see for itself.
func checkStreamDrill(t *testing.T, e *env, kind string, d drill.Report) {
	t.Helper()
	s := d.Stream
	if s == nil {
		t.Fatalf("%s: no stream in the report", kind)
	}
	w := s.Writer
	t.Logf("%s: stream token %d -> %d (%s): opened %dms after the fault (claim seen %dms, first changes %dms), predicted %dms; "+
		"committed %s at the takeover, resumed from %s; %d changes applied (%d after the takeover, %d before the fault), writer %d changes in %d transactions "+
		"(%d inserts, %d updates, %d deletes): %d applied twice; stale applier transactions refused %d; shard takeovers %d",
		kind, s.HolderToken, s.SuccessorToken, s.Successor, s.RtoMs, s.HandoverMs, s.FirstApplyMs, d.PredictedRtoMs,
		s.PosAtTakeover, s.ResumedFrom, s.AppliedChanges, s.ChangesAfterTakeover, s.ChangesAtFault, w.Changes, w.Transactions,
		w.Inserts, w.Updates, w.Deletes, s.ReplayedChanges, s.StaleRefused, len(d.Takeovers))
	if c := s.Cutover; c != nil {
		t.Logf("%s: cutover caught up with %s in %dms, verified in %dms: write freeze %dms (lag at start %dms)",
			kind, c.SourcePos, c.CatchUpMs, c.VerifyMs, c.FreezeMs, c.LagAtStartMs)
	}
	h := d.Instances[0]
	if h.Role != "holder" || s.HolderToken <= 0 || s.SuccessorToken <= s.HolderToken || s.Successor == "" || s.Successor == h.Name {
		t.Errorf("the stream went from token %d of %s to %d of %q: want a standby above the holder's", s.HolderToken, h.Name, s.SuccessorToken, s.Successor)
	}
	if h.Name != "drill-a" {
		t.Logf("the stream changed hands before the fault: the drill struck %s, which held it", h.Name)
	}
	if s.RtoMs <= 0 || s.HandoverMs <= 0 || s.ChangesAtFault <= 0 || s.ChangesAfterTakeover <= 0 {
		t.Errorf("rto %dms, handover %dms, %d changes before the fault, %d after the takeover: want all positive",
			s.RtoMs, s.HandoverMs, s.ChangesAtFault, s.ChangesAfterTakeover)
	}
	if s.PosAtTakeover == "" || s.ResumedFrom != s.PosAtTakeover {
		t.Errorf("the successor resumed from %q, the target had committed %q", s.ResumedFrom, s.PosAtTakeover)
	}
	if w.Inserts == 0 || w.Updates == 0 || w.Deletes == 0 || w.Failures != 0 {
		t.Errorf("writer %+v: want inserts, updates and deletes, none failed", w)
	}
	if s.AppliedChanges != w.Changes+s.ReplayedChanges || s.ReplayedChanges < 0 || s.ReplayedChanges > w.MaxTxChanges {
		t.Errorf("%d changes applied, %d written, %d replayed: want at most one source transaction (%d changes) applied twice",
			s.AppliedChanges, w.Changes, s.ReplayedChanges, w.MaxTxChanges)
	}
	if c := s.Cutover; c == nil || c.FreezeMs <= 0 || c.Verify == nil || !c.Verify.Equal || c.Changes != s.AppliedChanges {
		t.Errorf("cutover %+v: want a write freeze, a clean verification and every change applied (%d)", c, s.AppliedChanges)
	}
	switch kind {
	case "stream-kill":
		if !h.Killed || h.Exit != -1 {
			t.Errorf("holder %+v: want it killed", h)
		}
	case "stream-pause":
		if h.Killed || h.Exit != 4 && h.Exit != 0 || d.FaultMs < d.TTLMs {
			t.Errorf("holder exit %d (killed %v) after a pause of %dms: want exit 4 (fenced) or 0, woken after the TTL %dms", h.Exit, h.Killed, d.FaultMs, d.TTLMs)
		}
	}
	for _, in := range d.Instances[1:] {
		if in.Exit != 0 {
			t.Errorf("standby %s exit %d, want 0 after the cutover", in.Name, in.Exit)
		}
	}
	// Every shard the holder held was taken over.
	for _, sh := range d.Shards {
		n := 0
		for _, tk := range d.Takeovers {
			if tk.Shard == sh.Shard && tk.Token > sh.HolderToken && tk.PreviousOwner == h.Owner {
				n++
			}
		}
		if n != 1 || sh.FinalState != "done" {
			t.Errorf("shard %d held by the holder (token %d): %d takeovers, ended %s", sh.Shard, sh.HolderToken, n, sh.FinalState)
		}
	}
	if s.SlotLeft {
		t.Error("the drill reports a replication slot left")
	}
	if e.src == pgEngine {
		if n := queryInt(t, e.srcDB, "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()"); n != 0 {
			t.Errorf("%d replication slots left at the source after the drill", n)
		}
	}
	sameDump(t, e, "big", []string{"id"}, colNames(bigColumns))
}

// colNames are the names of cols.
func colNames(cols []col) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.name
	}
	return out
}
