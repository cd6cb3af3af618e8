package dialect

// myNow is the server's clock, UTC, whatever the session's time zone.
const myNow = `UTC_TIMESTAMP(6)`

// myMs is a UTC datetime expression as milliseconds since the Unix epoch.
func myMs(expr string) string {
	return `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ` + expr + `) DIV 1000`
}

// LeaseTable implements Lease. lease_until of a free lease is in the past
// (the epoch); the prev_ columns are the holder before the current one.
// Names compare byte for byte.
func (m MySQL) LeaseTable() string {
	return `CREATE TABLE IF NOT EXISTS ` + m.Quote(LeaseTable) + ` (
  name varchar(700) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, owner varchar(255) NOT NULL DEFAULT '',
  token bigint NOT NULL DEFAULT 0, lease_until datetime(6) NOT NULL DEFAULT '1970-01-01 00:00:00',
  renewed_at datetime(6) NULL, acquired_at datetime(6) NULL, released tinyint(1) NOT NULL DEFAULT 0,
  prev_owner varchar(255) NOT NULL DEFAULT '', prev_token bigint NOT NULL DEFAULT 0,
  prev_renewed_at datetime(6) NULL, prev_released tinyint(1) NOT NULL DEFAULT 0,
  PRIMARY KEY (name)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=` + m.collation()
}

// LeaseInit implements Lease.
func (m MySQL) LeaseInit() string {
	return `INSERT INTO ` + m.Quote(LeaseTable) + ` (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name`
}

// LeaseAcquire implements Lease. A single-table UPDATE assigns from left
// to right, each SET reading what the ones before it wrote: the prev_
// columns come first.
func (m MySQL) LeaseAcquire() string {
	return `UPDATE ` + m.Quote(LeaseTable) + ` SET prev_owner = owner, prev_token = token, prev_renewed_at = renewed_at,
  prev_released = released, owner = ?, token = token + 1, lease_until = ` + myNow + ` + INTERVAL ? * 1000 MICROSECOND,
  renewed_at = ` + myNow + `, acquired_at = ` + myNow + `, released = 0
WHERE name = ? AND lease_until <= ` + myNow
}

// LeaseRenew implements Lease. renewed_at always moves, so a renewal
// always reports its row as changed.
func (m MySQL) LeaseRenew() string {
	return `UPDATE ` + m.Quote(LeaseTable) + ` SET lease_until = ` + myNow + ` + INTERVAL ? * 1000 MICROSECOND, renewed_at = ` + myNow + `
WHERE name = ? AND owner = ? AND token = ? AND lease_until > ` + myNow
}

// LeaseRelease implements Lease.
func (m MySQL) LeaseRelease() string {
	return `UPDATE ` + m.Quote(LeaseTable) + ` SET lease_until = '1970-01-01 00:00:00', renewed_at = ` + myNow + `, released = 1
WHERE name = ? AND owner = ? AND token = ? AND lease_until > ` + myNow
}

// LeaseRead implements Lease.
func (m MySQL) LeaseRead(lock bool) string {
	q := `SELECT owner, token, TIMESTAMPDIFF(MICROSECOND, ` + myNow + `, lease_until) DIV 1000, COALESCE(` + myMs(`renewed_at`) + `, 0),
  COALESCE(` + myMs(`acquired_at`) + `, 0), released, prev_owner, prev_token, COALESCE(` + myMs(`prev_renewed_at`) + `, 0), prev_released
FROM ` + m.Quote(LeaseTable) + ` WHERE name = ?`
	if lock {
		q += ` FOR UPDATE`
	}
	return q
}

// LeaseRaise implements Lease.
func (m MySQL) LeaseRaise() string {
	return `UPDATE ` + m.Quote(LeaseTable) + ` SET token = GREATEST(token, ?) WHERE name = ?`
}

// LeaseForget implements Lease.
func (m MySQL) LeaseForget() string {
	return `DELETE FROM ` + m.Quote(LeaseTable) + ` WHERE name = ? AND lease_until <= ` + myNow
}
