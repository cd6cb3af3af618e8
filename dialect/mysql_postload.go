package dialect

// postLoadHelper creates the post-load steps' table (Helpers).
func (m MySQL) postLoadHelper() string {
	return `CREATE TABLE IF NOT EXISTS ` + m.Quote(PostLoadTable) + ` (
  plan varchar(191) NOT NULL, seq int NOT NULL, kind varchar(32) NOT NULL, tbl varchar(191) NOT NULL, name varchar(191) NOT NULL,
  stmt mediumtext NOT NULL, exists_sql text NOT NULL, exists_args text NOT NULL,
  state varchar(16) NOT NULL DEFAULT 'pending', token bigint NOT NULL DEFAULT 0,
  updated_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (plan, seq)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=` + m.collation()
}

// PostLoadInsert implements PostLoad.
func (m MySQL) PostLoadInsert() string {
	return `INSERT INTO ` + m.Quote(PostLoadTable) + ` (plan, seq, kind, tbl, name, stmt, exists_sql, exists_args) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
}

// PostLoadList implements PostLoad.
func (m MySQL) PostLoadList() string {
	return `SELECT seq, kind, tbl, name, stmt, exists_sql, exists_args, state FROM ` + m.Quote(PostLoadTable) + ` WHERE plan = ?` + postLoadOrder
}

// PostLoadDone implements PostLoad.
func (m MySQL) PostLoadDone() string {
	return `UPDATE ` + m.Quote(PostLoadTable) + ` SET state = 'done', token = ?, updated_at = CURRENT_TIMESTAMP(6) WHERE plan = ? AND seq = ?`
}

// PostLoadState implements PostLoad.
func (m MySQL) PostLoadState() string {
	return `UPDATE ` + m.Quote(PostLoadTable) + ` SET state = ?, token = ?, updated_at = CURRENT_TIMESTAMP(6) WHERE plan = ? AND seq = 0`
}

// PostLoadResume implements PostLoad.
func (m MySQL) PostLoadResume() string {
	return `UPDATE ` + m.Quote(PostLoadTable) + ` SET state = 'pending', updated_at = CURRENT_TIMESTAMP(6) WHERE plan = ? AND seq = 0 AND state = 'halted'`
}
