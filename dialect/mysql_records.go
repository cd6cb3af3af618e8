package dialect

// recordsHelpers creates the takeover and progress tables (Helpers). Their
// times are UTC by the server's clock, whatever a session's time zone.
func (m MySQL) recordsHelpers() []string {
	tail := " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=" + m.collation()
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(TakeoverTable) + ` (
  plan varchar(191) NOT NULL, tbl varchar(191) NOT NULL, shard int NOT NULL, token bigint NOT NULL,
  at datetime(6) NOT NULL, record mediumtext NOT NULL,
  PRIMARY KEY (plan, tbl, shard, token))` + tail,
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(ProgressTable) + ` (
  plan varchar(191) NOT NULL, tbl varchar(191) NOT NULL, shard int NOT NULL, owner varchar(255) NOT NULL,
  rows_per_sec double NOT NULL, eta_ms bigint NOT NULL, table_rows bigint NOT NULL,
  kept_until datetime(6) NOT NULL, PRIMARY KEY (plan, tbl, shard))` + tail,
	}
}

// TakeoverAdd implements Records.
func (m MySQL) TakeoverAdd() string {
	return `INSERT INTO ` + m.Quote(TakeoverTable) + ` (plan, tbl, shard, token, record, at) VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE plan = plan`
}

// TakeoverNote implements Records.
func (m MySQL) TakeoverNote() string {
	return `UPDATE ` + m.Quote(TakeoverTable) + ` SET record = ? WHERE plan = ? AND tbl = ? AND shard = ? AND token = ?`
}

// TakeoverPrune implements Records.
func (m MySQL) TakeoverPrune() string {
	return `DELETE FROM ` + m.Quote(TakeoverTable) + ` WHERE plan = ? AND tbl = ? AND shard = ?
  AND at < UTC_TIMESTAMP(6) - INTERVAL ? * 1000 MICROSECOND`
}

// TakeoverCount implements Records.
func (m MySQL) TakeoverCount() string {
	return `SELECT count(*) FROM ` + m.Quote(TakeoverTable) + ` WHERE plan = ? AND tbl = ? AND shard = ?
  AND at > UTC_TIMESTAMP(6) - INTERVAL ? * 1000 MICROSECOND`
}

// TakeoverLast implements Records.
func (m MySQL) TakeoverLast() string {
	return `SELECT record FROM ` + m.Quote(TakeoverTable) + ` WHERE plan = ? AND tbl = ? AND shard = ?
ORDER BY at DESC, token DESC LIMIT 1`
}

// ProgressPut implements Records.
func (m MySQL) ProgressPut() string {
	return `INSERT INTO ` + m.Quote(ProgressTable) + ` (plan, tbl, shard, owner, rows_per_sec, eta_ms, table_rows, kept_until)
VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND)
ON DUPLICATE KEY UPDATE owner = VALUES(owner), rows_per_sec = VALUES(rows_per_sec),
  eta_ms = VALUES(eta_ms), table_rows = VALUES(table_rows), kept_until = VALUES(kept_until)`
}

// ProgressGet implements Records.
func (m MySQL) ProgressGet() string {
	return `SELECT owner, rows_per_sec, eta_ms, table_rows FROM ` + m.Quote(ProgressTable) + `
WHERE plan = ? AND tbl = ? AND shard = ? AND kept_until > UTC_TIMESTAMP(6)`
}
