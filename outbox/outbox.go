// Package outbox keeps a plan's run events in the target database: each
// event is a row written in the transaction of the state change it
// reports (the batch that finishes a shard, a takeover's claim, a halt),
// under that transaction's fence check, so a fenced holder can never
// enqueue one and a committed change is never left unannounced. Each
// event's id is derived from what it reports (plan, type, subject, token),
// so writing it again is a no-op and a receiver can de-duplicate by it.
// What became of each event for each sink (delivered, skipped by the
// sink's filter, given up after its age) is kept beside it; package notify
// delivers them.
//
//	_migrate_outbox   (seq, id, plan, type, at, data): one row an event
//	_migrate_delivery (plan, sink, id, state, attempts, at): an event's fate for a sink
//	_migrate_sink     (plan, sink, last_error, at, disabled): a sink's last error
package outbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
)

// MaxData is the largest event data kept as it is; larger data is
// replaced by a note of its size (an event is a notification, not a log).
const MaxData = 20_000

// Event is one run event.
type Event struct {
	Seq  int64
	ID   string
	Plan string
	Type string
	At   time.Time // when it was recorded, by the target's clock
	Data json.RawMessage
}

// Payload is the JSON a sink receives: the Standard Webhooks shape, with
// the id and the plan beside the type, the timestamp and the data. The
// same event gives the same bytes every time it is sent.
func (e Event) Payload() []byte {
	b, _ := json.Marshal(struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Plan      string          `json:"plan"`
		Data      json.RawMessage `json:"data"`
	}{e.ID, e.Type, e.At.UTC().Format(time.RFC3339Nano), e.Plan, e.Data})
	return b
}

// ID is the deterministic id of the event of type typ about parts (its
// subject and the token under which it happened) in plan: "evt_" and 24
// hex digits of a SHA-256 over them.
func ID(plan, typ string, parts ...any) string {
	h := sha256.New()
	for _, p := range append([]any{plan, typ}, parts...) {
		fmt.Fprintf(h, "%v\x00", p)
	}
	return "evt_" + hex.EncodeToString(h.Sum(nil))[:24]
}

// Unit is the plan's delivery as a leased unit: one instance delivers its
// events at a time, under this unit's lease.
func Unit(plan string) fence.Shard { return fence.Shard{Plan: plan, Table: "_notify", Index: 0} }

// The states of an event for a sink.
const (
	Delivered = "delivered" // the sink took it (2xx, exit 0)
	Skipped   = "skipped"   // the sink's filter does not want it
	GivenUp   = "given_up"  // not delivered within the sink's give_up_after: kept, not tried again automatically
)

// Store runs the outbox statements of one target dialect.
type Store struct {
	sql dialect.Outbox
}

// New is a Store with the statements of d.
func New(d dialect.Outbox) *Store { return &Store{sql: d} }

// Add records the event of type typ with id and data in q (the state
// change's transaction). An event recorded already is left as it is.
func (s *Store) Add(ctx context.Context, q fence.Querier, plan, typ, id string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("outbox: %s: %w", typ, err)
	}
	if len(b) > MaxData {
		b, _ = json.Marshal(map[string]any{"truncated": true, "bytes": len(b)})
	}
	if _, err := q.ExecContext(ctx, s.sql.OutboxAdd(), id, plan, typ, string(b)); err != nil {
		return fmt.Errorf("outbox: record %s: %w", typ, err)
	}
	return nil
}

// Events returns every event of plan, in order; none when the target has
// no outbox yet.
func (s *Store) Events(ctx context.Context, q fence.Querier, plan string) ([]Event, error) {
	return s.events(ctx, q, plan, s.sql.OutboxEvents(), plan)
}

// Pending returns, in order, up to limit events of plan that no delivery
// of sink records.
func (s *Store) Pending(ctx context.Context, q fence.Querier, plan, sink string, limit int) ([]Event, error) {
	return s.events(ctx, q, plan, s.sql.OutboxPending(), plan, sink, limit)
}

func (s *Store) events(ctx context.Context, q fence.Querier, plan, query string, args ...any) ([]Event, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if dialect.MissingTable(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: read the events of %s: %w", plan, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e := Event{Plan: plan}
		var data string
		if err := rows.Scan(&e.Seq, &e.ID, &e.Type, &e.At, &data); err != nil {
			return nil, fmt.Errorf("outbox: read the events of %s: %w", plan, err)
		}
		e.Data = json.RawMessage(data)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Delivery is what became of an event for a sink.
type Delivery struct {
	Sink, ID, State string
	Attempts        int
	At              time.Time
}

// Mark records what became of event id for sink.
func (s *Store) Mark(ctx context.Context, q fence.Querier, plan, sink, id, state string, attempts int) error {
	if _, err := q.ExecContext(ctx, s.sql.DeliveryPut(), plan, sink, id, state, attempts); err != nil {
		return fmt.Errorf("outbox: mark %s %s for %s: %w", id, state, sink, err)
	}
	return nil
}

// Deliveries returns every delivery record of plan.
func (s *Store) Deliveries(ctx context.Context, q fence.Querier, plan string) ([]Delivery, error) {
	rows, err := q.QueryContext(ctx, s.sql.Deliveries(), plan)
	if dialect.MissingTable(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: read the deliveries of %s: %w", plan, err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		var d Delivery
		if err := rows.Scan(&d.Sink, &d.ID, &d.State, &d.Attempts, &d.At); err != nil {
			return nil, fmt.Errorf("outbox: read the deliveries of %s: %w", plan, err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// SinkRecord is a sink's last error and whether a 410 disabled it.
type SinkRecord struct {
	LastError string
	At        time.Time
	Disabled  bool
}

// SetSink records sink's last error ("" after a success) and whether it
// is disabled. Errors are cut to a line of at most 500 bytes.
func (s *Store) SetSink(ctx context.Context, q fence.Querier, plan, sink string, rec SinkRecord) error {
	msg := strings.Join(strings.Fields(rec.LastError), " ")
	if len(msg) > 500 {
		msg = msg[:500]
	}
	if _, err := q.ExecContext(ctx, s.sql.SinkPut(), plan, sink, msg, rec.Disabled); err != nil {
		return fmt.Errorf("outbox: record sink %s: %w", sink, err)
	}
	return nil
}

// Sinks returns the record of every sink of plan that has one.
func (s *Store) Sinks(ctx context.Context, q fence.Querier, plan string) (map[string]SinkRecord, error) {
	rows, err := q.QueryContext(ctx, s.sql.Sinks(), plan)
	if dialect.MissingTable(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: read the sinks of %s: %w", plan, err)
	}
	defer rows.Close()
	out := map[string]SinkRecord{}
	for rows.Next() {
		var name string
		var r SinkRecord
		if err := rows.Scan(&name, &r.LastError, &r.At, &r.Disabled); err != nil {
			return nil, fmt.Errorf("outbox: read the sinks of %s: %w", plan, err)
		}
		out[name] = r
	}
	return out, rows.Err()
}

// Sink reads one sink's record (the zero record when it has none).
func (s *Store) Sink(ctx context.Context, q fence.Querier, plan, sink string) (SinkRecord, error) {
	all, err := s.Sinks(ctx, q, plan)
	return all[sink], err
}
