package status

import "time"

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
