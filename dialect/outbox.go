package dialect

// The tables of a plan's run events (package outbox): the events, each
// written in the transaction of the state change it reports; each sink's
// deliveries; and each sink's last error and whether it is disabled.
const (
	OutboxTable   = "_migrate_outbox"
	DeliveryTable = "_migrate_delivery"
	SinkTable     = "_migrate_sink"
)

// Outbox is the statements of the run events' outbox (package outbox).
// Times are the database's clock.
type Outbox interface {
	// OutboxAdd records an event at the database's time: args id, plan,
	// type, data; one recorded already (its id) is left as it is.
	OutboxAdd() string
	// OutboxEvents yields (seq, id, type, at, data) of a plan's events in
	// the order they were recorded: args plan.
	OutboxEvents() string
	// OutboxPending yields the events of OutboxEvents no delivery of the
	// sink records, in order, at most a limit: args plan, sink, limit.
	OutboxPending() string
	// DeliveryPut records (or replaces) what became of an event for a
	// sink at the database's time: args plan, sink, id, state, attempts.
	DeliveryPut() string
	// Deliveries yields (sink, id, state, attempts, at) of a plan: args plan.
	Deliveries() string
	// SinkPut records a sink's last error ("" after a success) at the
	// database's time and whether it is disabled: args plan, sink, error,
	// disabled.
	SinkPut() string
	// Sinks yields (sink, last_error, at, disabled) of a plan: args plan.
	Sinks() string
}
