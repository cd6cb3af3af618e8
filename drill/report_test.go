package drill

import (
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/runner"
	"github.com/migrate-dev/migrate/verify"
)

// passingKill is the report of a kill drill that met every criterion.
func passingKill() *Report {
	standby := &runner.Report{Owner: "drill-b-2", RowsWritten: 27000, Shards: []runner.ShardResult{{Table: "big", Shard: 0, State: "done", Token: 2, Rows: 27000}}}
	return &Report{
		Kind: Kill, TTLMs: 2000, BatchSize: 1000,
		Instances: []Instance{
			{Name: "drill-a", Role: "holder", Owner: "drill-a-1", Exit: -1, Killed: true},
			{Name: "drill-b", Role: "standby", Owner: "drill-b-2", Exit: 0, Takeovers: 1, report: standby},
		},
		Takeovers: []Takeover{{Instance: "drill-b", Takeover: runner.Takeover{Table: "big", Shard: 0, Token: 2, PreviousToken: 1, ReplayedRows: 0}}},
		Shards:    []ShardOutcome{{Table: "big", Shard: 0, HolderToken: 1, Successor: 2, FinalToken: 2, FinalState: "done", HolderRows: -1, OlderRows: 3000}},
		History: []Event{
			{Kind: "lease", Table: "big", Owner: "drill-a-1", Token: 1},
			{Kind: "fence", Table: "big", Owner: "drill-a-1", Token: 1},
			{Kind: "lease", Table: "big", Owner: "drill-b-2", Token: 2},
			{Kind: "fence", Table: "big", Owner: "drill-b-2", Token: 2},
		},
		Verify: &runner.Verification{Equal: true, Tables: []verify.Result{{Table: "big", SourceRows: 30000, TargetRows: 30000}}},
	}
}

func TestReport_evaluate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *Report)
		fails  string // the check that must fail; "" when all pass
	}{
		{"kill passes", func(*Report) {}, ""},
		{"differences", func(r *Report) { r.Verify.Equal, r.Verify.Tables[0].Missing = false, 3 }, "verification clean"},
		{"no verification", func(r *Report) { r.Verify = nil }, "verification clean"},
		{"stale write accepted", func(r *Report) { r.StaleWritesAccepted, r.Shards[0].StaleCommitted = 1000, 1000 }, "no stale write accepted"},
		{"two batches replayed", func(r *Report) { r.Takeovers[0].ReplayedRows, r.ReplayedRows = 1001, 1001 }, "at most one batch replayed"},
		{"no takeover", func(r *Report) { r.Takeovers = nil }, "taken over"},
		{"takeover with an old token", func(r *Report) { r.Takeovers[0].Token = 1 }, "taken over"},
		{"holder not killed", func(r *Report) { r.Instances[0].Killed, r.Instances[0].Exit = false, 0 }, "holder killed"},
		{"standby failed", func(r *Report) { r.Instances[1].Exit = 1 }, "standbys exit 0"},
		{"shard not done", func(r *Report) { r.Shards[0].FinalState = "running" }, "one writer per shard and token"},
		{"two finishers", func(r *Report) {
			r.Instances = append(r.Instances, Instance{Name: "drill-c", Role: "standby", report: &runner.Report{
				Shards: []runner.ShardResult{{Table: "big", Shard: 0, State: "done", Token: 3}}}})
		}, "one writer per shard and token"},
		{"token with two owners", func(r *Report) { r.History[2].Token = 1 }, "tokens grow, one owner per token"},
		{"token going down", func(r *Report) {
			r.History = append(r.History, Event{Kind: "fence", Table: "big", Owner: "drill-c-3", Token: 1})
		}, "tokens grow, one owner per token"},
		{"drill error", func(r *Report) { r.Error = "the holder exited" }, "-"},
		{"pause fenced", func(r *Report) { r.Kind, r.Instances[0].Killed, r.Instances[0].Exit = Pause, false, 4 }, ""},
		{"pause holder not fenced", func(r *Report) { r.Kind, r.Instances[0].Killed, r.Instances[0].Exit = Pause, false, 0 }, "holder exit"},
		{"short pause with a takeover", func(r *Report) { r.Kind, r.Instances[0].Killed, r.Instances[0].Exit = ShortPause, false, 0 }, "no takeover"},
		{"late write without held bytes", func(r *Report) { r.Kind, r.Instances[0].Killed, r.Instances[0].Exit = LateWrite, false, 4 }, "late write delivered after the takeover"},
		{"late write held too briefly", func(r *Report) {
			r.Kind, r.Instances[0].Killed, r.Instances[0].Exit = LateWrite, false, 4
			r.LateWrite = &Late{HeldBytes: 100, HeldMs: 1500}
		}, "late write delivered after the takeover"},
		{"late write", func(r *Report) {
			r.Kind, r.Instances[0].Killed, r.Instances[0].Exit = LateWrite, false, 4
			r.LateWrite = &Late{HeldBytes: 100, HeldMs: 2100, DeliveredAfterTakeoverMs: 5}
		}, ""},
		{"volatile redis, token not above", func(r *Report) {
			r.Kind, r.Persistence, r.Instances[0].Killed, r.Instances[0].Exit = RedisRestart, "off", false, 4
			r.Takeovers, r.Shards[0].FinalToken = nil, 1
		}, "token above the watermark"},
		{"volatile redis, token reused in Redis only", func(r *Report) {
			r.Kind, r.Persistence, r.Instances[0].Killed, r.Instances[0].Exit = RedisRestart, "off", false, 4
			r.Takeovers = nil
			r.History = append(r.History, Event{Kind: "lease", Table: "big", Owner: "drill-b-2", Token: 1})
		}, ""},
		{"volatile redis, the holder took its shard again", func(r *Report) {
			r.Kind, r.Persistence, r.Instances[0].Killed, r.Instances[0].Exit = RedisRestart, "off", false, 0
		}, ""},
		{"volatile redis, holder failed", func(r *Report) {
			r.Kind, r.Persistence, r.Instances[0].Killed, r.Instances[0].Exit = RedisRestart, "off", false, 1
		}, "holder exit"},
		{"persistent redis, holder kept its lease", func(r *Report) {
			r.Kind, r.Persistence, r.Instances[0].Killed, r.Instances[0].Exit = RedisRestart, "on", false, 0
			r.Takeovers, r.Shards[0].FinalToken = nil, 1
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := passingKill()
			if tc.name == "short pause with a takeover" {
				r.Instances[1].report.Shards[0].ByOther = true
			}
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
			case tc.fails == "-" && r.Pass:
				t.Errorf("want a failure: %+v", r.Checks)
			case tc.fails != "" && tc.fails != "-" && (r.Pass || strings.Join(failed, "|") != tc.fails):
				t.Errorf("failed checks %v, want only %q: %+v", failed, tc.fails, r.Checks)
			}
		})
	}
}

func TestReport_evaluateNoInstances(t *testing.T) {
	r := &Report{Kind: Kill}
	r.evaluate()
	if r.Pass || len(r.Checks) != 1 {
		t.Errorf("a drill whose instances never ran: pass %v, checks %+v", r.Pass, r.Checks)
	}
}

func TestResult_Diff(t *testing.T) {
	r := &Result{Drills: []Report{{Verify: &runner.Verification{Equal: true}}, {}}}
	if r.Diff() {
		t.Error("Diff with equal or missing verifications")
	}
	r.Drills[1].Verify = &runner.Verification{}
	if !r.Diff() {
		t.Error("no Diff with a verification that found differences")
	}
}
