package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/notify"
)

// NotifyReport is what the notify drill's receiver accepted of the run
// events the plan's outbox recorded (notify.Count): every one at least
// once, none lost, none twice with other bytes.
type NotifyReport struct {
	notify.Tally
	// Rejected counts the requests the receiver refused: a bad
	// signature, method or body.
	Rejected int            `json:"rejected"`
	ByType   map[string]int `json:"by_type"` // events recorded, per type
	// PlanDoneDelivered: the receiver accepted the plan's plan.done.
	PlanDoneDelivered bool `json:"plan_done_delivered"`
	// RedeliveredEvents are the events accepted more than once, as "type
	// id": at least the one the standby sent before it was killed.
	RedeliveredEvents []string `json:"redelivered_events"`
	// TakenOver are the takeovers the outbox's shard.taken_over events
	// record, the killed standby's too (it printed no report).
	TakenOver []AnnouncedTakeover `json:"taken_over"`
}

// AnnouncedTakeover is a takeover as its shard.taken_over event tells it.
type AnnouncedTakeover struct {
	// Instance is the label of the watermark's owner under Token as the
	// drill saw it; "" when it did not.
	Instance       string `json:"instance"`
	Table          string `json:"table"`
	Shard          int    `json:"shard"`
	Token          int64  `json:"token"`
	PreviousOwner  string `json:"previous_owner"`
	PreviousToken  int64  `json:"previous_token"`
	RtoMs          int64  `json:"rto_ms"` // up to the claim
	PredictedRtoMs int64  `json:"predicted_rto_ms"`
}

// collectNotify reads every event the outbox recorded, in order, and
// tallies what the receiver accepted against them. The instances have all
// exited by then, and a verification records no event: nothing is
// recorded or sent any more.
func (d *drill) collectNotify(ctx context.Context) error {
	rd := d.status
	if rd.Outbox == nil {
		return errors.New("drill: no reader of the plan's outbox")
	}
	evs, err := rd.Outbox.Events(ctx, rd.Target, d.plan.Name)
	if err != nil {
		return err
	}
	n := &NotifyReport{ByType: map[string]int{}, RedeliveredEvents: []string{}, TakenOver: []AnnouncedTakeover{}}
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
		n.ByType[e.Type]++
		if e.Type != "shard.taken_over" {
			continue
		}
		var t AnnouncedTakeover
		if err := json.Unmarshal(e.Data, &t); err != nil {
			return fmt.Errorf("drill: event %s: %w", e.ID, err)
		}
		for _, h := range d.rep.History {
			if h.Kind == "fence" && h.Table == t.Table && h.Shard == t.Shard && h.Token == t.Token {
				t.Instance = label(h.Owner)
			}
		}
		n.TakenOver = append(n.TakenOver, t)
	}
	got := d.hook.rc.Accepted()
	n.Tally = notify.Count(ids, got)
	n.Rejected = len(d.hook.rc.Rejected())
	times := map[string]int{}
	for _, g := range got {
		times[g.ID]++
		if times[g.ID] == 2 {
			n.RedeliveredEvents = append(n.RedeliveredEvents, g.Type+" "+g.ID)
		}
		if g.Type == "plan.done" && slices.Contains(ids, g.ID) {
			n.PlanDoneDelivered = true
		}
	}
	d.rep.Notify = n
	return nil
}

// checkNotify checks the delivery of the run events: each one recorded
// reached the receiver, signed, the one the standby sent before its kill
// again, with the same bytes.
func (r *Report) checkNotify(add addFunc) {
	n := r.Notify
	if n == nil {
		add("no run event lost", false, "the outbox was not read")
		return
	}
	add("no run event lost", n.Lost == 0 && n.Produced > 0, "%d recorded, %d delivered, %d lost", n.Produced, n.Delivered, n.Lost)
	add("no duplicate after de-duplication", n.Duplicates == 0,
		"%d events accepted with other bytes than the first time or never recorded", n.Duplicates)
	add("signatures valid", n.Rejected == 0, "%d requests rejected by the receiver", n.Rejected)
	again := "none"
	if len(n.RedeliveredEvents) > 0 {
		again = strings.Join(n.RedeliveredEvents, ", ")
	}
	add("the event sent before the kill delivered again", n.Redelivered >= 1, "%d redelivered: %s", n.Redelivered, again)
	add("plan.done delivered", n.PlanDoneDelivered, "plan.done recorded %d, delivered %v", n.ByType["plan.done"], n.PlanDoneDelivered)
}

// checkNotifyExits checks the notify drill's instances after the holder:
// the standby killed by the drill at its fault point, the fresh instance
// exit 0.
func (r *Report) checkNotifyExits(add addFunc) {
	ok, parts := len(r.Instances) == 3, []string{}
	for i, in := range r.Instances[1:] {
		good := !in.Killed && in.Exit == 0
		if i == 0 {
			good = in.Killed && in.Exit == -1
		}
		ok = ok && good
		state := fmt.Sprintf("exit %d", in.Exit)
		if in.Killed {
			state = "killed"
		}
		parts = append(parts, in.Name+" "+state)
	}
	add("standby killed after its send, fresh instance exit 0", ok, "%s", strings.Join(parts, ", "))
}
