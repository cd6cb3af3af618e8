package drill

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/migrate-dev/migrate/notify"
	"github.com/migrate-dev/migrate/runner"
)

func TestHookPlan(t *testing.T) {
	const url = "http://127.0.0.1:4711/migrate-drill"
	wantSinks := []map[string]any{{"name": "drill", "webhook": map[string]any{"url": url, "secret_env": hookSecretEnv}}}
	for _, tc := range []struct {
		name, plan string
		keep       []string // text the derived plan keeps as written
	}{
		{"sinks replaced", `# orders to the new cluster
name: orders
source: ${SOURCE_URL}
target: "${TARGET_URL}"
notify:
  - name: ops
    webhook:
      url: https://hooks.example.com/migrate
      secret_env: OPS_SECRET
      headers:
        Authorization: "Bearer ${OPS_TOKEN}"
  - name: pager
    command: [/usr/local/bin/page, --team, db]
tables:
  - name: public.orders
    key: [id]
    shards: 2
`, []string{"# orders to the new cluster", "source: ${SOURCE_URL}", `target: "${TARGET_URL}"`, "key: [id]", "shards: 2"}},
		{"sinks added", "name: orders\nsource: ${SOURCE_URL}\ntarget: ${TARGET_URL}\ntables:\n  - name: orders\n", []string{"source: ${SOURCE_URL}"}},
		{"empty notify", "name: orders\nnotify: []\nsource: x\n", []string{"source: x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := hookPlan([]byte(tc.plan), url)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := yaml.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var want map[string]any
			if err := yaml.Unmarshal([]byte(tc.plan), &want); err != nil {
				t.Fatal(err)
			}
			want["notify"] = wantSinks
			if !yamlEqual(t, got, want) {
				t.Errorf("derived plan\n%s\nwant the plan with notify: %v", out, wantSinks)
			}
			for _, s := range append(tc.keep, "name: drill") {
				if !strings.Contains(string(out), s) {
					t.Errorf("derived plan lost %q:\n%s", s, out)
				}
			}
			for _, gone := range []string{"OPS_TOKEN", "OPS_SECRET", "hooks.example.com", "page"} {
				if strings.Contains(string(out), gone) {
					t.Errorf("derived plan keeps %q of the plan's own sinks:\n%s", gone, out)
				}
			}
		})
	}
	for _, bad := range []string{"- a\n- b\n", "name: [", "just text"} {
		if _, err := hookPlan([]byte(bad), url); err == nil {
			t.Errorf("hookPlan(%q): no error", bad)
		}
	}
}

// yamlEqual compares two decoded documents by their YAML encoding.
func yamlEqual(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}

// passingNotify is the report of a notify drill that met every criterion:
// drill-b took the shard over from the killed holder (its takeover known
// from its event only), was killed after sending shard.done, and drill-c
// found the shard done and delivered the rest, shard.done again.
func passingNotify() *Report {
	r := passingKill()
	r.Kind = Notify
	r.Instances[1] = Instance{Name: "drill-b", Role: "standby", Owner: "drill-b-2", Exit: -1, Killed: true}
	r.Instances = append(r.Instances, Instance{Name: "drill-c", Role: "fresh", Owner: "drill-c-3", report: &runner.Report{
		Owner: "drill-c-3", Shards: []runner.ShardResult{{Table: "big", Shard: 0, State: "done", Token: 2, ByOther: true}}}})
	r.Takeovers = []Takeover{}
	r.Notify = &NotifyReport{
		Tally:             notify.Tally{Produced: 3, Delivered: 3, Redelivered: 1},
		ByType:            map[string]int{"shard.taken_over": 1, "shard.done": 1, "plan.done": 1},
		TakenOver:         []AnnouncedTakeover{{Instance: "drill-b", Table: "big", Token: 2, PreviousOwner: "drill-a-1", PreviousToken: 1}},
		RedeliveredEvents: []string{"shard.done evt_1"}, PlanDoneDelivered: true,
	}
	return r
}

func TestReport_evaluateNotify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *Report)
		fails  string // the checks that must fail, |-separated; "" when all pass
	}{
		{"passes", func(*Report) {}, ""},
		{"lost", func(r *Report) { r.Notify.Delivered, r.Notify.Lost = 2, 1 }, "no run event lost"},
		{"nothing recorded", func(r *Report) { r.Notify.Tally = notify.Tally{} }, "no run event lost|the event sent before the kill delivered again"},
		{"duplicate", func(r *Report) { r.Notify.Duplicates = 1 }, "no duplicate after de-duplication"},
		{"bad signature", func(r *Report) { r.Notify.Rejected = 2 }, "signatures valid"},
		{"not redelivered", func(r *Report) { r.Notify.Redelivered, r.Notify.RedeliveredEvents = 0, nil }, "the event sent before the kill delivered again"},
		{"plan.done missing", func(r *Report) { r.Notify.PlanDoneDelivered = false }, "plan.done delivered"},
		{"outbox not read", func(r *Report) { r.Notify = nil }, "taken over|no run event lost"},
		{"no takeover event", func(r *Report) { r.Notify.TakenOver = nil }, "taken over"},
		{"takeover in a report", func(r *Report) {
			r.Notify.TakenOver = nil
			r.Takeovers = []Takeover{{Instance: "drill-c", Takeover: runner.Takeover{Table: "big", Token: 3, PreviousToken: 2}}}
		}, ""},
		{"standby not killed", func(r *Report) { r.Instances[1].Killed, r.Instances[1].Exit = false, 0 }, "standby killed after its send, fresh instance exit 0"},
		{"fresh instance failed", func(r *Report) { r.Instances[2].Exit = 1 }, "standby killed after its send, fresh instance exit 0"},
		{"no fresh instance", func(r *Report) { r.Instances = r.Instances[:2] }, "standby killed after its send, fresh instance exit 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := passingNotify()
			tc.change(r)
			r.evaluate()
			var failed []string
			for _, c := range r.Checks {
				if !c.Pass {
					failed = append(failed, c.Name)
				}
			}
			if got := strings.Join(failed, "|"); got != tc.fails || r.Pass != (tc.fails == "") {
				t.Errorf("pass %v, failed checks %q, want %q: %+v", r.Pass, got, tc.fails, r.Checks)
			}
		})
	}
}
