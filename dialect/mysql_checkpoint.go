package dialect

// CheckpointInit implements Dialect.
func (m MySQL) CheckpointInit() string {
	return `INSERT INTO ` + m.Quote(CheckpointTable) + ` (plan, tbl, shard, lo_key, hi_key) VALUES (?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE plan = plan`
}

// CheckpointRead implements Dialect.
func (m MySQL) CheckpointRead(lock bool) string {
	q := `SELECT lo_key, hi_key, last_key, rows_done, token, state, updated_at FROM ` + m.Quote(CheckpointTable) + `
WHERE plan = ? AND tbl = ? AND shard = ?`
	if lock {
		q += " FOR UPDATE"
	}
	return q
}

// CheckpointAdvance implements Dialect.
func (m MySQL) CheckpointAdvance() string {
	return `UPDATE ` + m.Quote(CheckpointTable) + ` SET last_key = ?, rows_done = ?, token = ?,
  state = 'running', updated_at = CURRENT_TIMESTAMP(6)
WHERE plan = ? AND tbl = ? AND shard = ? AND rows_done IN (?, ?)`
}

// CheckpointState implements Dialect.
func (m MySQL) CheckpointState() string {
	return `UPDATE ` + m.Quote(CheckpointTable) + ` SET state = ?, token = ?, updated_at = CURRENT_TIMESTAMP(6)
WHERE plan = ? AND tbl = ? AND shard = ?`
}

// CheckpointResume implements Dialect.
func (m MySQL) CheckpointResume(byTable, byShard bool) string {
	q := `UPDATE ` + m.Quote(CheckpointTable) + ` SET state = 'pending', updated_at = CURRENT_TIMESTAMP(6) WHERE plan = ? AND state = 'halted'`
	if byTable {
		q += " AND tbl = ?"
	}
	if byShard {
		q += " AND shard = ?"
	}
	return q
}

// CheckpointList implements Dialect.
func (m MySQL) CheckpointList() string {
	return `SELECT tbl, shard, state, rows_done, last_key, token, updated_at FROM ` + m.Quote(CheckpointTable) + `
WHERE plan = ? ORDER BY tbl, shard`
}
