package status

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/outbox"
	"github.com/migrate-dev/migrate/plans"
)

// SinkStatus is the delivery of the plan's events to one sink.
type SinkStatus struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // webhook or command
	// Delivered and Pending count the events the sink wants: delivered
	// to it, and not yet (GivenUp of them set aside after give_up_after:
	// kept, not tried again automatically).
	Delivered int64 `json:"delivered"`
	Pending   int64 `json:"pending"`
	GivenUp   int64 `json:"given_up"`
	// OldestPendingMs is the age of the oldest pending event; null when
	// none is pending.
	OldestPendingMs *int64 `json:"oldest_pending_ms"`
	// Disabled: the receiver answered 410 Gone; nothing is sent to it
	// until `migrate events enable`.
	Disabled bool `json:"disabled"`
	// LastError is the last failed attempt's error ("" when the last
	// attempt succeeded), at LastErrorAt.
	LastError   string     `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
}

// EventStatus is one event of the outbox and its delivery.
type EventStatus struct {
	Seq  int64     `json:"seq"`
	ID   string    `json:"id"`
	Type string    `json:"type"`
	At   time.Time `json:"at"`
	// Subject is what the event is about: "table", "table/shard", or the
	// plan's name.
	Subject string `json:"subject"`
	// DeliveredTo and PendingFor name the sinks that want the event.
	DeliveredTo []string `json:"delivered_to"`
	PendingFor  []string `json:"pending_for"`
}

// maxEvents is how many of the latest events status shows.
const maxEvents = 50

// events reads the outbox: each sink's delivery, the latest events, and
// the reason of each halted shard (its latest shard.halted event).
func (rd *Reader) events(ctx context.Context, st *Status) error {
	st.Notify, st.Events = []SinkStatus{}, []EventStatus{}
	if rd.Outbox == nil {
		return nil
	}
	evs, all, sinks, err := Events(ctx, rd.Outbox, rd.Target, rd.Plan)
	if err != nil {
		return err
	}
	st.Notify = sinks
	for i := len(all) - 1; i >= 0 && len(st.Events) < maxEvents; i-- {
		st.Events = append(st.Events, all[i])
	}
	halts := map[string]outbox.Event{}
	for _, e := range evs {
		if e.Type == "shard.halted" {
			halts[subject(e)] = e // the latest wins
		}
	}
	for i, s := range st.Tables {
		if s.State != string(cursor.Halted) {
			continue
		}
		if e, ok := halts[s.Target+"/"+strconv.Itoa(s.Shard)]; ok {
			var h struct {
				Reason        string `json:"reason"`
				ResumeCommand string `json:"resume_command"`
			}
			if json.Unmarshal(e.Data, &h) == nil {
				st.Tables[i].HaltReason, st.Tables[i].ResumeCommand = h.Reason, h.ResumeCommand
			}
		}
	}
	return nil
}

// Events reads a plan's outbox: every event, in order, as recorded and
// with its delivery to each sink of the plan; and each sink's totals.
func Events(ctx context.Context, store *outbox.Store, db *sql.DB, plan *plans.Plan) ([]outbox.Event, []EventStatus, []SinkStatus, error) {
	evs, err := store.Events(ctx, db, plan.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	dels, err := store.Deliveries(ctx, db, plan.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	recs, err := store.Sinks(ctx, db, plan.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	state := map[[2]string]string{} // sink, id -> state
	for _, d := range dels {
		state[[2]string{d.Sink, d.ID}] = d.State
	}
	now := time.Now()
	sinks := make([]SinkStatus, len(plan.Notify))
	for i, s := range plan.Notify {
		sinks[i] = SinkStatus{Name: s.Name, Kind: s.Kind()}
		if r, ok := recs[s.Name]; ok {
			sinks[i].Disabled, sinks[i].LastError = r.Disabled, r.LastError
			if r.LastError != "" {
				at := r.At
				sinks[i].LastErrorAt = &at
			}
		}
	}
	out := make([]EventStatus, 0, len(evs))
	for _, e := range evs {
		es := EventStatus{Seq: e.Seq, ID: e.ID, Type: e.Type, At: e.At, Subject: subject(e), DeliveredTo: []string{}, PendingFor: []string{}}
		for i, s := range plan.Notify {
			switch state[[2]string{s.Name, e.ID}] {
			case outbox.Delivered:
				es.DeliveredTo = append(es.DeliveredTo, s.Name)
				sinks[i].Delivered++
			case outbox.GivenUp:
				es.PendingFor = append(es.PendingFor, s.Name)
				sinks[i].GivenUp++
				sinks[i].Pending++
			case outbox.Skipped:
			default:
				if !s.Wants(e.Type) {
					continue
				}
				es.PendingFor = append(es.PendingFor, s.Name)
				sinks[i].Pending++
				if sinks[i].OldestPendingMs == nil {
					age := max(now.Sub(e.At), 0).Milliseconds()
					sinks[i].OldestPendingMs = &age
				}
			}
		}
		out = append(out, es)
	}
	return evs, out, sinks, nil
}

// subject is what an event is about: "table/shard" for a shard's,
// "table" for a table's, the plan's name for the plan's and the post-load
// phase's.
func subject(e outbox.Event) string {
	var d struct {
		Target *string `json:"target"`
		Table  *string `json:"table"`
		Shard  *int    `json:"shard"`
	}
	_ = json.Unmarshal(e.Data, &d)
	switch {
	case d.Target != nil && d.Shard != nil && *d.Shard >= 0:
		return *d.Target + "/" + strconv.Itoa(*d.Shard)
	case d.Table != nil && *d.Table != "_postload":
		return *d.Table
	}
	return e.Plan
}
