package drill

import (
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/runner"
)

// passingStreamKill is the report of a stream-kill drill that met every
// criterion: the holder held the stream and its one shard.
func passingStreamKill() *Report {
	r := passingKill()
	r.Kind = StreamKill
	r.Verify = &runner.Verification{Equal: true, Tables: r.Verify.Tables}
	r.Stream = &StreamReport{HolderToken: 1, Successor: "drill-b", SuccessorToken: 2, RtoMs: 2000, HandoverMs: 1900, FirstApplyMs: 2100,
		ChangesAtFault: 10, PosAtTakeover: "0/16B3748", ResumedFrom: "0/16B3748", ChangesAfterTakeover: 80, AppliedChanges: 100,
		Writer:  WriterStats{Table: "big", Transactions: 70, Changes: 100, Inserts: 20, Updates: 60, Deletes: 20, MaxTxChanges: 2},
		Cutover: &runner.Cutover{SourcePos: "0/16C0000", CatchUpMs: 300, VerifyMs: 40, FreezeMs: 340, Changes: 100, Verify: r.Verify}}
	return r
}

func TestReport_evaluateStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *Report)
		fails  string // the check that must fail; "" when all pass
	}{
		{"stream-kill passes", func(*Report) {}, ""},
		{"copy done before the fault", func(r *Report) { r.Shards, r.Takeovers = nil, nil }, ""},
		{"held shard not taken over", func(r *Report) { r.Takeovers = nil }, "held shards taken over"},
		{"no stream takeover", func(r *Report) { r.Stream.SuccessorToken, r.Stream.Successor = 0, "" }, "stream taken over"},
		{"resumed before the committed position", func(r *Report) { r.Stream.ResumedFrom = "0/16B0000" }, "stream resumed at the committed position"},
		{"resumption not seen", func(r *Report) { r.Stream.ResumedFrom = "" }, "stream resumed at the committed position"},
		{"one transaction applied twice", func(r *Report) { r.Stream.AppliedChanges, r.Stream.ReplayedChanges = 102, 2 }, ""},
		{"two transactions applied twice", func(r *Report) { r.Stream.AppliedChanges, r.Stream.ReplayedChanges = 103, 3 }, "every change applied once"},
		{"a change lost", func(r *Report) { r.Stream.AppliedChanges, r.Stream.ReplayedChanges = 99, -1 }, "every change applied once"},
		{"nothing applied after the takeover", func(r *Report) { r.Stream.ChangesAfterTakeover = 0 }, "changes applied after the takeover"},
		{"the writer failed", func(r *Report) { r.Stream.Writer.Failures = 1 }, "the writer's changes committed"},
		{"no cutover", func(r *Report) { r.Stream.Cutover, r.Stream.CutoverError = nil, "lagging" }, "cutover"},
		{"slot left", func(r *Report) { r.Stream.SlotLeft = true }, "no replication slot left"},
		{"many rows overwritten by the copy", func(r *Report) { r.ReplayedRows = 5000 }, ""},
		{"a takeover replaying two batches", func(r *Report) { r.Takeovers[0].ReplayedRows = 1001 }, "at most one batch replayed"},
		{"the stream changed hands before the fault: drill-b struck", func(r *Report) {
			r.Instances[0].Name, r.Instances[1].Name, r.Stream.Successor = "drill-b", "drill-a", "drill-a"
		}, ""},
		{"the successor is the instance struck", func(r *Report) { r.Stream.Successor = "drill-a" }, "stream taken over"},
		{"paused holder fenced", func(r *Report) { r.Kind, r.Instances[0].Killed, r.Instances[0].Exit = StreamPause, false, 4 }, ""},
		{"paused holder went on until the cutover", func(r *Report) { r.Kind, r.Instances[0].Killed, r.Instances[0].Exit = StreamPause, false, 0 }, ""},
		{"paused holder failed", func(r *Report) { r.Kind, r.Instances[0].Killed, r.Instances[0].Exit = StreamPause, false, 1 }, "holder exit"},
		{"stream token with two owners", func(r *Report) {
			r.History = append(r.History, Event{Kind: "fence", Table: streamUnit, Shard: streamShard, Owner: "drill-a-1", Token: 1},
				Event{Kind: "fence", Table: streamUnit, Shard: streamShard, Owner: "drill-b-2", Token: 1})
		}, "tokens grow, one owner per token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := passingStreamKill()
			tc.change(r)
			r.evaluate()
			var failed []string
			for _, c := range r.Checks {
				if !c.Pass {
					failed = append(failed, c.Name)
				}
			}
			switch {
			case tc.fails == "" && (!r.Pass || len(failed) > 0):
				t.Errorf("want a pass, failed %v: %+v", failed, r.Checks)
			case tc.fails != "" && (r.Pass || strings.Join(failed, "|") != tc.fails):
				t.Errorf("failed checks %v, want only %q: %+v", failed, tc.fails, r.Checks)
			}
		})
	}
}

func TestLogFields(t *testing.T) {
	line := `time=2026-12-07T16:03:03.852Z level=INFO msg="applying the change stream" unit="p q/_stream#-2" from=0/285E5FB8 token=2 err="a \"quoted\" = b"`
	f := logFields(line)
	want := map[string]string{"time": "2026-12-07T16:03:03.852Z", "level": "INFO", "msg": "applying the change stream",
		"unit": "p q/_stream#-2", "from": "0/285E5FB8", "token": "2", "err": `a "quoted" = b`}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s = %q, want %q", k, f[k], v)
		}
	}
	if len(f) != len(want) {
		t.Errorf("fields %v, want %v", f, want)
	}
	if label("drill-b-0f0b01608a719d0e") != "drill-b" {
		t.Errorf("label = %q", label("drill-b-0f0b01608a719d0e"))
	}
}

func TestStaleRefused(t *testing.T) {
	l := &lineLog{}
	for _, s := range []string{
		`level=ERROR msg=run err="fence: p/_stream#-2: token 3 of drill-a-1 refused, the target holds token 4 of drill-b-2"`,
		`level=ERROR msg=failed err="p/_stream#-2: fence: p/_stream#-2: token 3 of drill-a-1 refused, the target holds token 4 of drill-b-2"`,
		`level=WARN msg=x err="fence: p/big#0: token 3 of drill-a-1 refused, the target holds token 4 of drill-b-2"`,
		`level=WARN msg=x err="fence: p/_stream#-2: token 5 of drill-a-1 refused, the target holds token 6 of drill-b-2"`,
	} {
		_, _ = l.Write([]byte(s + "\n"))
	}
	d := &drill{plan: &plans.Plan{Name: "p"}, holder: &child{stderr: l}}
	if n := d.staleRefused(); n != 2 {
		t.Errorf("staleRefused = %d, want 2 (tokens 3 and 5 of the stream; the shard's is not counted)", n)
	}
}
