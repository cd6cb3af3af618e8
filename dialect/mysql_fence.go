package dialect

// FenceClaim implements Dialect: the fence is assigned last, after the
// columns whose guards read it.
func (m MySQL) FenceClaim() string {
	guard := "token < VALUES(token)"
	return `INSERT INTO ` + m.Quote(FenceTable) + ` (plan, tbl, shard, token, owner) VALUES (?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE owner = IF(` + guard + `, VALUES(owner), owner),
  claimed_at = IF(` + guard + `, CURRENT_TIMESTAMP(6), claimed_at),
  token = IF(` + guard + `, VALUES(token), token)`
}

// FenceFloor implements Dialect.
func (m MySQL) FenceFloor() string {
	return `INSERT INTO ` + m.Quote(FenceTable) + ` (plan, tbl, shard, token, owner) VALUES (?, ?, ?, ?, '')
ON DUPLICATE KEY UPDATE plan = plan`
}

// FenceCheck implements Dialect: a locking UPDATE (never a snapshot read)
// that always changes the row, so a match reports one affected row.
func (m MySQL) FenceCheck() string {
	return `UPDATE ` + m.Quote(FenceTable) + ` SET checks = checks + 1
WHERE plan = ? AND tbl = ? AND shard = ? AND token = ? AND owner = ?`
}

// FenceBreak implements Dialect: none. MySQL ends a statement whose client
// stops sending for net_read_timeout (30s by default), and a claim that
// waits longer for the row is retried as an outage.
func (MySQL) FenceBreak() string { return "" }

// FenceEnd implements Dialect: none (see FenceBreak).
func (MySQL) FenceEnd() string { return "" }

// FenceRead implements Dialect.
func (m MySQL) FenceRead() string {
	return `SELECT token, owner FROM ` + m.Quote(FenceTable) + ` WHERE plan = ? AND tbl = ? AND shard = ?`
}
