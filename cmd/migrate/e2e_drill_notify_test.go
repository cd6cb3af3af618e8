package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/drill"
)

// TestDrill_Notify: the notify drill kills the holder mid-copy, then the
// standby that took over right after a webhook accepted its first
// shard.done and before it marked it delivered; a fresh instance
// finishes. Every run event the outbox recorded reaches the drill's own
// receiver, none lost, none twice with other bytes, the one sent before
// the kill twice. The plan's own sinks get nothing, and no secret is in
// the output. Each engine as source and target: the outbox is in the
// target. A second notify drill on the same plan is refused.
func TestDrill_Notify(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		e.leaseTTL = "2s"
		seedBig(t, e, "big", drillRows)
		own := newReceiver(t)
		script := filepath.Join(t.TempDir(), "events.jsonl")
		e.extra = notifyPlan(own, script)
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 2})

		r := startMigrateEnv(t, notifyEnv, "drill", "-p", plan, "notify", "--json", "--holder-latency", "20ms").wait(t)
		var raw map[string]any
		decodeJSON(t, r, &raw)
		for i, d := range requireList(t, "drill --json", raw, "drills") {
			where := fmt.Sprintf("drills[%d]", i)
			requireKeys(t, where+".notify", requireKeys(t, where, d, "notify")["notify"], "produced", "delivered", "redelivered", "lost",
				"duplicates_after_dedup", "out_of_order", "rejected", "by_type")
		}
		var res drill.Result
		decodeJSON(t, r, &res)
		wantPass(t, r, res)
		d := res.Drills[0]
		n := d.Notify
		t.Logf("notify: %+v; rto %dms, handover %dms, fault at %d rows", *n, d.RtoMs, d.HandoverMs, d.FaultAtRows)

		if n.Lost != 0 || n.Duplicates != 0 || n.Redelivered < 1 || n.Produced != n.Delivered || n.Rejected != 0 || !n.PlanDoneDelivered {
			t.Errorf("%+v: want nothing lost, no duplicate after de-duplication, the event sent before the kill again, every recorded event delivered", *n)
		}
		if n.ByType["shard.done"] != 2 || n.ByType["plan.done"] != 1 || n.ByType["postload.done"] != 1 || n.ByType["shard.taken_over"] < 2 {
			t.Errorf("events recorded %v: want 2 shard.done, a postload.done, a plan.done and a takeover of each shard at least", n.ByType)
		}
		for _, tk := range n.TakenOver {
			if tk.PreviousOwner == d.Instances[0].Owner && tk.Instance != "drill-b" {
				t.Errorf("takeover %+v of the holder's shard by %s, want drill-b", tk, tk.Instance)
			}
		}
		if in := d.Instances; len(in) != 3 || in[0].Name != "drill-a" || !in[0].Killed || in[1].Name != "drill-b" || !in[1].Killed ||
			in[2].Name != "drill-c" || in[2].Killed || in[2].Exit != 0 {
			t.Errorf("instances %+v: want drill-a and drill-b killed, drill-c exit 0", in)
		}
		assertDrillRows(t, e)

		// The plan's own sinks were not sent the drill's events.
		if got := own.Accepted(); len(got) != 0 {
			t.Errorf("the plan's webhook received %d events of the drill", len(got))
		}
		if _, err := os.Stat(script); err == nil {
			t.Errorf("the plan's command sink ran during the drill")
		}
		if out := r.stdout + r.stderr; strings.Contains(out, "whsec_") || strings.Contains(out, "db-oncall") {
			t.Errorf("a secret in the drill's output:\n%s", r)
		}

		// Its events stay in the outbox: a second drill, whose events
		// would repeat their ids, is refused without --reset (which
		// deletes them with the checkpoints).
		again := startMigrateEnv(t, notifyEnv, "drill", "-p", plan, "notify", "--holder-latency", "20ms").wait(t)
		wantCode(t, again, 2)
		if !strings.Contains(again.stderr, "run events of plan") {
			t.Errorf("a second notify drill on the plan: want a refusal naming its run events\n%s", again)
		}
		assertDrillRows(t, e)
	})
}

// TestDrill_NotifyNeedsPlanFile: the flags form has no plan file to
// give the instances a copy of.
func TestDrill_NotifyNeedsPlanFile(t *testing.T) {
	t.Parallel()
	r := runMigrate(t, "drill", "notify", "--table", "big")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "-p PLAN") {
		t.Errorf("want a usage error asking for -p PLAN:\n%s", r)
	}
}
