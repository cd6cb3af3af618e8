package dialect

// outboxHelpers creates the outbox, delivery and sink tables (Helpers).
// The outbox's seq orders a plan's events as they were recorded; times are
// UTC by the server's clock.
func (m MySQL) outboxHelpers() []string {
	tail := " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=" + m.collation()
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(OutboxTable) + ` (
  seq bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, id varchar(64) NOT NULL, plan varchar(191) NOT NULL,
  type varchar(64) NOT NULL, at datetime(6) NOT NULL, data mediumtext NOT NULL,
  UNIQUE KEY (id), KEY (plan, seq))` + tail,
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(DeliveryTable) + ` (
  plan varchar(191) NOT NULL, sink varchar(64) NOT NULL, id varchar(64) NOT NULL, state varchar(16) NOT NULL,
  attempts int NOT NULL, at datetime(6) NOT NULL, PRIMARY KEY (plan, sink, id))` + tail,
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(SinkTable) + ` (
  plan varchar(191) NOT NULL, sink varchar(64) NOT NULL, last_error text NOT NULL, at datetime(6) NOT NULL,
  disabled tinyint(1) NOT NULL, PRIMARY KEY (plan, sink))` + tail,
	}
}

// OutboxAdd implements Outbox.
func (m MySQL) OutboxAdd() string {
	return `INSERT INTO ` + m.Quote(OutboxTable) + ` (id, plan, type, data, at) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE id = id`
}

// OutboxEvents implements Outbox.
func (m MySQL) OutboxEvents() string {
	return `SELECT seq, id, type, at, data FROM ` + m.Quote(OutboxTable) + ` WHERE plan = ? ORDER BY seq`
}

// OutboxPending implements Outbox.
func (m MySQL) OutboxPending() string {
	return `SELECT o.seq, o.id, o.type, o.at, o.data FROM ` + m.Quote(OutboxTable) + ` o WHERE o.plan = ?
  AND NOT EXISTS (SELECT 1 FROM ` + m.Quote(DeliveryTable) + ` d WHERE d.plan = o.plan AND d.sink = ? AND d.id = o.id)
ORDER BY o.seq LIMIT ?`
}

// DeliveryPut implements Outbox.
func (m MySQL) DeliveryPut() string {
	return `INSERT INTO ` + m.Quote(DeliveryTable) + ` (plan, sink, id, state, attempts, at) VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE state = VALUES(state), attempts = VALUES(attempts), at = VALUES(at)`
}

// Deliveries implements Outbox.
func (m MySQL) Deliveries() string {
	return `SELECT sink, id, state, attempts, at FROM ` + m.Quote(DeliveryTable) + ` WHERE plan = ?`
}

// SinkPut implements Outbox.
func (m MySQL) SinkPut() string {
	return `INSERT INTO ` + m.Quote(SinkTable) + ` (plan, sink, last_error, at, disabled) VALUES (?, ?, ?, UTC_TIMESTAMP(6), ?)
ON DUPLICATE KEY UPDATE last_error = VALUES(last_error), at = VALUES(at), disabled = VALUES(disabled)`
}

// Sinks implements Outbox.
func (m MySQL) Sinks() string {
	return `SELECT sink, last_error, at, disabled FROM ` + m.Quote(SinkTable) + ` WHERE plan = ?`
}
