package main_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/notify"
)

// webhookSecret signs the test receiver's requests; it must appear in no
// output.
const webhookSecret = "whsec_dGVzdC1zZWNyZXQtb2YtdGhlLXJlY2VpdmVy"

// receiver serves a notify.Receiver (signatures checked, the header from
// the environment required) on an address of its own; it can go down (its
// listener closed) and come back on the same address.
type receiver struct {
	*notify.Receiver
	t    *testing.T
	addr string

	mu  sync.Mutex
	srv *http.Server
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	key, err := notify.Key(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, Receiver: &notify.Receiver{Key: key, Want: http.Header{"X-Team": {"db-oncall"}}}}
	rc.up()
	t.Cleanup(rc.down)
	return rc
}

// url is where the plan sends events.
func (rc *receiver) url() string { return "http://" + rc.addr + "/hooks/migrate" }

// up listens (again, on the same address once it has one).
func (rc *receiver) up() {
	rc.t.Helper()
	addr := rc.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for range 100 { // the address of a closed listener can take a moment to be free again
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		rc.t.Fatalf("receiver: %v", err)
	}
	rc.addr = ln.Addr().String()
	srv := &http.Server{Handler: rc.Receiver, ReadHeaderTimeout: 10 * time.Second}
	rc.mu.Lock()
	rc.srv = srv
	rc.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// down closes the listener and every connection: requests are refused.
func (rc *receiver) down() {
	rc.mu.Lock()
	srv := rc.srv
	rc.srv = nil
	rc.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// check fails the test on a request the receiver refused.
func (rc *receiver) check() {
	rc.t.Helper()
	if bad := rc.Rejected(); len(bad) > 0 {
		rc.t.Errorf("requests refused by the receiver: %q", bad)
	}
}

// notifyPlan is the plan's notify: section: the receiver, with a secret
// and a header from the environment, and a command that appends the
// events it wants to file.
func notifyPlan(rc *receiver, file string) string {
	return fmt.Sprintf(`notify:
  - name: ops
    webhook:
      url: %q
      secret_env: MIGRATE_TEST_WEBHOOK_SECRET
      headers:
        X-Team: "${MIGRATE_TEST_TEAM}"
    timeout: 5s
  - name: script
    command: ["/bin/sh", "-c", "cat >> '%s'; echo >> '%s'"]
    events: ["plan.*", "shard.halted"]
`, rc.url(), file, file)
}

// notifyEnv is the environment the plan's sinks read.
var notifyEnv = []string{"MIGRATE_TEST_WEBHOOK_SECRET=" + webhookSecret, "MIGRATE_TEST_TEAM=db-oncall"}

// outboxEvent is an event as the target's outbox holds it.
type outboxEvent struct {
	id, typ string
	data    map[string]any
}

// outbox reads e's outbox in order (none when it has no table yet).
func (e *env) outbox(t *testing.T) []outboxEvent {
	t.Helper()
	rows, err := e.dstDB.QueryContext(t.Context(), "SELECT id, type, data FROM _migrate_outbox WHERE plan = "+e.dst.ph(1)+" ORDER BY seq", e.name)
	if err != nil {
		if strings.Contains(err.Error(), "exist") {
			return nil
		}
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxEvent
	for rows.Next() {
		var ev outboxEvent
		var data string
		if err := rows.Scan(&ev.id, &ev.typ, &data); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(data), &ev.data); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// stoppedAt waits until p stopped itself at the fault point it was given
// (internal/faultpoint).
func stoppedAt(t *testing.T, p *proc, point string) {
	t.Helper()
	poll(t, 3*time.Minute, "faultpoint "+point, func() bool {
		select {
		case <-p.done:
			t.Fatalf("migrate exited before reaching faultpoint %s:\n%s", point, p.stderr.String())
		default:
		}
		if !strings.Contains(p.stderr.String(), "faultpoint "+point+" reached") {
			return false
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			return false
		}
		_, after, _ := strings.Cut(string(stat), ") ")
		return strings.HasPrefix(after, "T")
	})
}

// TestNotify_AtLeastOnceUnderFaults: run events are recorded with the
// state change they report and delivered at least once, with one id,
// whatever kills the holder around an event: a holder killed inside the
// transaction that finishes a shard (before it commits), one frozen there
// and woken after its successor finished (a zombie: it records nothing),
// one killed after the commit before the send, one killed after the send
// before the mark. A dry run records nothing. In every direction: the outbox is in
// the target, PostgreSQL or MySQL.
func TestNotify_AtLeastOnceUnderFaults(t *testing.T) {
	t.Parallel()
	inDirections(t, directions, func(t *testing.T, e *env) {
		e.leaseTTL = "2s"
		seedFollow(t, e)
		rc := newReceiver(t)
		script := filepath.Join(t.TempDir(), "events.jsonl")
		e.extra = "max_takeovers: 10\n" + notifyPlan(rc, script) // four holders die
		plan := e.plan(t, planTable{name: "Accounts", shards: 2}, planTable{name: "order_lines", shards: 2})
		run := func(name, point string) *proc {
			env := append(slices.Clone(notifyEnv), "MIGRATE_FAULTPOINT="+point)
			return startMigrateEnv(t, env, "run", "-p", plan, "--instance", name)
		}

		dry := startMigrateEnv(t, notifyEnv, "run", "-p", plan, "--dry-run").wait(t)
		wantCode(t, dry, 0)
		if evs := e.outbox(t); len(evs) != 0 {
			t.Fatalf("a dry run recorded %d events", len(evs))
		}

		a := run("a", "outbox.before_commit:shard.done")
		stoppedAt(t, a, "outbox.before_commit:shard.done")
		a.kill(t) // its transaction, the event in it, rolls back
		zombie := run("zombie", "outbox.before_commit:shard.done")
		stoppedAt(t, zombie, "outbox.before_commit:shard.done")
		for _, ev := range e.outbox(t) {
			if ev.typ == "shard.done" {
				t.Fatalf("shard.done recorded before its transaction committed: %+v\n%s", ev, zombie.stderr.String())
			}
		}
		b := run("b", "notify.before_send:shard.done")
		stoppedAt(t, b, "notify.before_send:shard.done")
		b.kill(t)
		c := run("c", "notify.after_send:shard.done")
		stoppedAt(t, c, "notify.after_send:shard.done")
		c.kill(t)
		d := startMigrateEnv(t, notifyEnv, "run", "-p", plan, "--instance", "d").wait(t)
		wantCode(t, d, 0)
		before := e.outbox(t)

		signal(t, zombie, syscall.SIGCONT)
		z := zombie.wait(t)
		wantCode(t, z, 4)
		after := e.outbox(t)
		if !slices.EqualFunc(before, after, func(a, b outboxEvent) bool { return a.id == b.id }) {
			t.Errorf("the woken zombie changed the outbox:\nbefore %v\nafter  %v", before, after)
		}

		// Expected: every shard done once (with the token of the
		// checkpoint that says so), a takeover for the shards the zombie
		// held, the post-load phase, each table verified equal, the plan.
		count := map[string]int{}
		for _, ev := range after {
			count[ev.typ]++
			switch ev.typ {
			case "shard.done":
				cp := e.checkpoint(t, ev.data["target"].(string), int(ev.data["shard"].(float64)))
				if cp.state != "done" || float64(cp.token) != ev.data["token"].(float64) {
					t.Errorf("shard.done %v, checkpoint %+v", ev.data, cp)
				}
			case "table.verified":
				if ev.data["equal"] != true {
					t.Errorf("table.verified %v", ev.data)
				}
			}
		}
		if count["shard.done"] != 4 || count["postload.done"] != 1 || count["table.verified"] != 2 || count["plan.done"] != 1 || count["shard.taken_over"] < 1 {
			t.Errorf("events recorded %v, want 4 shard.done, a postload.done, 2 table.verified, a plan.done and takeovers", count)
		}
		if after[len(after)-1].typ != "plan.done" {
			t.Errorf("last event %s, want plan.done", after[len(after)-1].typ)
		}

		// Delivered: every event at least once, nothing else; the event
		// the holder sent and did not mark, twice; plan.done last.
		got := rc.Accepted()
		rc.check()
		tally := notify.Count(ids(after), got)
		if tally.Lost != 0 || tally.Duplicates != 0 || tally.Delivered != len(after) || tally.Redelivered < 1 {
			t.Errorf("%+v: want nothing lost, no duplicate after de-duplication, and the event sent before the kill (after_send) twice", tally)
		}
		if len(got) == 0 || got[len(got)-1].Type != "plan.done" {
			t.Errorf("plan.done was not delivered last")
		}
		t.Logf("events: %+v", tally)

		// The command sink wants plan.* only.
		lines, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(lines), `"type":"plan.done"`); n < 1 || strings.Contains(string(lines), "shard.done") {
			t.Errorf("the command sink got %q, want plan.done only", lines)
		}
		for _, r := range []result{dry, d, z} {
			if strings.Contains(r.stdout+r.stderr, webhookSecret) || strings.Contains(r.stdout+r.stderr, "db-oncall") {
				t.Errorf("a secret in the output of %v", r)
			}
		}
	})
}

// ids are the ids of evs, in order.
func ids(evs []outboxEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.id
	}
	return out
}

// notifyStatus is the part of `status --json` about the sink ops.
func notifyStatus(t *testing.T, plan string) map[string]any {
	t.Helper()
	r := startMigrateEnv(t, notifyEnv, "status", "-p", plan, "--json").wait(t)
	wantCode(t, r, 0)
	var st struct {
		Notify []map[string]any `json:"notify"`
	}
	decodeJSON(t, r, &st)
	for _, s := range st.Notify {
		if s["name"] == "ops" {
			return s
		}
	}
	t.Fatalf("no sink ops in status: %s", r.stdout)
	return nil
}

// TestNotify_ReceiverFailures: a receiver that is down, then answers 500,
// 429 with Retry-After, then 410 Gone: nothing is lost, the sink is
// disabled by the 410 and shows so, and once enabled again every event
// arrives, in order; redeliver sends one again with its id.
func TestNotify_ReceiverFailures(t *testing.T) {
	t.Parallel()
	inDirections(t, []direction{pgToPG}, func(t *testing.T, e *env) {
		e.leaseTTL = "3s"
		seedFollow(t, e)
		rc := newReceiver(t)
		e.extra = notifyPlan(rc, filepath.Join(t.TempDir(), "events.jsonl"))
		plan := e.plan(t, planTable{name: "Accounts", shards: 2}, planTable{name: "order_lines"})

		rc.down()
		run := startMigrateEnv(t, notifyEnv, "run", "-p", plan, "--instance", "a")
		poll(t, 3*time.Minute, "the sink's error in status", func() bool {
			s := notifyStatus(t, plan)
			return s["pending"].(float64) > 0 && strings.Contains(fmt.Sprint(s["last_error"]), "refused")
		})
		rc.Answer = func(n int) (int, http.Header) { // set while no request is served: the receiver is down
			switch n {
			case 1:
				return http.StatusInternalServerError, nil
			case 2:
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}
			case 3:
				return http.StatusGone, nil
			}
			return http.StatusNoContent, nil
		}
		rc.up()
		r := run.wait(t)
		wantCode(t, r, 0)
		// The run may end before the receiver's third answer: what is
		// left is delivered by `events deliver`, which meets it then. A
		// disabled sink is not waited for.
		wantCode(t, startMigrateEnv(t, notifyEnv, "events", "deliver", "-p", plan, "--timeout", "2m").wait(t), 0)
		if s := notifyStatus(t, plan); s["disabled"] != true || s["pending"].(float64) == 0 || !strings.Contains(fmt.Sprint(s["last_error"]), "410") {
			t.Fatalf("status of ops after a 410: %v, want disabled with events pending", s)
		}
		if got := rc.Accepted(); len(got) != 0 {
			t.Fatalf("accepted %d events before the sink answered 2xx", len(got))
		}
		wantCode(t, startMigrateEnv(t, notifyEnv, "events", "enable", "-p", plan, "--sink", "ops").wait(t), 0)
		d := startMigrateEnv(t, notifyEnv, "events", "deliver", "-p", plan, "--timeout", "2m").wait(t)
		wantCode(t, d, 0)

		outbox := e.outbox(t)
		got := rc.Accepted()
		rc.check()
		want := ids(outbox)
		if tally := notify.Count(want, got); tally.Delivered != len(want) || tally.Redelivered+tally.Duplicates+tally.OutOfOrder != 0 {
			t.Errorf("%+v: want the outbox's %d events once each, in order", tally, len(want))
		}
		if s := notifyStatus(t, plan); s["delivered"].(float64) != float64(len(outbox)) || s["pending"].(float64) != 0 || s["disabled"] != false || s["last_error"] != "" {
			t.Errorf("status of ops after the delivery: %v", s)
		}

		rd := startMigrateEnv(t, notifyEnv, "events", "redeliver", "-p", plan, "--id", want[0], "--sink", "ops").wait(t)
		wantCode(t, rd, 0)
		if got2 := rc.Accepted(); len(got2) != len(got)+1 || got2[len(got)].ID != want[0] || string(got2[len(got)].Body) != string(got[0].Body) {
			t.Errorf("redeliver of %s: received %d events after it, want one more, the same bytes", want[0], len(got2))
		}
		list := startMigrateEnv(t, notifyEnv, "events", "-p", plan, "--json").wait(t)
		wantCode(t, list, 0)
		var evs struct {
			Events []struct {
				ID          string   `json:"id"`
				DeliveredTo []string `json:"delivered_to"`
				PendingFor  []string `json:"pending_for"`
			} `json:"events"`
		}
		decodeJSON(t, list, &evs)
		for _, ev := range evs.Events {
			if !slices.Contains(ev.DeliveredTo, "ops") {
				t.Errorf("events --json: %+v not delivered to ops", ev)
			}
		}
		for _, out := range []result{r, d, rd, list} {
			if strings.Contains(out.stdout+out.stderr, webhookSecret) || strings.Contains(out.stdout+out.stderr, "db-oncall") {
				t.Errorf("a secret in the output: %v", out)
			}
		}
	})
}
