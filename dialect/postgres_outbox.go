package dialect

// outboxHelpers creates the outbox, delivery and sink tables (Helpers).
// The outbox's seq orders a plan's events as they were recorded. Every
// index is in the CREATE TABLE: a CREATE INDEX, even IF NOT EXISTS, would
// wait for any transaction that recorded an event and is still open (a
// frozen holder's).
func (p Postgres) outboxHelpers() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + p.Quote(OutboxTable) + ` (
  seq bigint GENERATED ALWAYS AS IDENTITY, id text NOT NULL UNIQUE, plan text NOT NULL,
  type text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp(), data text NOT NULL,
  PRIMARY KEY (plan, seq))`,
		`CREATE TABLE IF NOT EXISTS ` + p.Quote(DeliveryTable) + ` (
  plan text NOT NULL, sink text NOT NULL, id text NOT NULL, state text NOT NULL,
  attempts integer NOT NULL, at timestamptz NOT NULL, PRIMARY KEY (plan, sink, id))`,
		`CREATE TABLE IF NOT EXISTS ` + p.Quote(SinkTable) + ` (
  plan text NOT NULL, sink text NOT NULL, last_error text NOT NULL, at timestamptz NOT NULL,
  disabled boolean NOT NULL, PRIMARY KEY (plan, sink))`,
	}
}

// OutboxAdd implements Outbox.
func (p Postgres) OutboxAdd() string {
	return `INSERT INTO ` + p.Quote(OutboxTable) + ` (id, plan, type, data) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO NOTHING`
}

// OutboxEvents implements Outbox.
func (p Postgres) OutboxEvents() string {
	return `SELECT seq, id, type, at, data FROM ` + p.Quote(OutboxTable) + ` WHERE plan = $1 ORDER BY seq`
}

// OutboxPending implements Outbox.
func (p Postgres) OutboxPending() string {
	return `SELECT o.seq, o.id, o.type, o.at, o.data FROM ` + p.Quote(OutboxTable) + ` o WHERE o.plan = $1
  AND NOT EXISTS (SELECT 1 FROM ` + p.Quote(DeliveryTable) + ` d WHERE d.plan = o.plan AND d.sink = $2 AND d.id = o.id)
ORDER BY o.seq LIMIT $3`
}

// DeliveryPut implements Outbox.
func (p Postgres) DeliveryPut() string {
	return `INSERT INTO ` + p.Quote(DeliveryTable) + ` (plan, sink, id, state, attempts, at) VALUES ($1, $2, $3, $4, $5, clock_timestamp())
ON CONFLICT (plan, sink, id) DO UPDATE SET state = EXCLUDED.state, attempts = EXCLUDED.attempts, at = EXCLUDED.at`
}

// Deliveries implements Outbox.
func (p Postgres) Deliveries() string {
	return `SELECT sink, id, state, attempts, at FROM ` + p.Quote(DeliveryTable) + ` WHERE plan = $1`
}

// SinkPut implements Outbox.
func (p Postgres) SinkPut() string {
	return `INSERT INTO ` + p.Quote(SinkTable) + ` (plan, sink, last_error, at, disabled) VALUES ($1, $2, $3, clock_timestamp(), $4)
ON CONFLICT (plan, sink) DO UPDATE SET last_error = EXCLUDED.last_error, at = EXCLUDED.at, disabled = EXCLUDED.disabled`
}

// Sinks implements Outbox.
func (p Postgres) Sinks() string {
	return `SELECT sink, last_error, at, disabled FROM ` + p.Quote(SinkTable) + ` WHERE plan = $1`
}
