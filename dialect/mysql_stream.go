package dialect

import "strings"

// streamHelpers creates the stream's tables (Helpers).
func (m MySQL) streamHelpers() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(StreamTable) + ` (
  plan varchar(255) NOT NULL PRIMARY KEY, pos text NOT NULL, start_pos text NOT NULL,
  state varchar(16) NOT NULL DEFAULT 'following',
  txs bigint NOT NULL DEFAULT 0, changes bigint NOT NULL DEFAULT 0, source_commit datetime(6) NULL,
  applied_at datetime(6) NULL, lag_ms bigint NOT NULL DEFAULT 0, lag_bytes bigint NOT NULL DEFAULT 0,
  started_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB`,
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(StreamTableTable) + ` (
  plan varchar(255) NOT NULL, tbl varchar(255) NOT NULL, applied bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (plan, tbl)) ENGINE=InnoDB`,
	}
}

// StreamSchema implements Stream.
func (MySQL) StreamSchema() string { return "SELECT DATABASE()" }

// StreamInit implements Stream.
func (m MySQL) StreamInit() string {
	return `INSERT IGNORE INTO ` + m.Quote(StreamTable) + ` (plan, pos, start_pos) SELECT ?, p, p FROM (SELECT ? AS p) AS v`
}

// StreamTableInit implements Stream.
func (m MySQL) StreamTableInit() string {
	return `INSERT IGNORE INTO ` + m.Quote(StreamTableTable) + ` (plan, tbl) VALUES (?, ?)`
}

// StreamRead implements Stream.
func (m MySQL) StreamRead(lock bool) string {
	q := `SELECT pos, start_pos, state, txs, changes, source_commit, applied_at, lag_ms, lag_bytes, started_at, UTC_TIMESTAMP(6) FROM ` + m.Quote(StreamTable) + ` WHERE plan = ?`
	if lock {
		q += " FOR UPDATE"
	}
	return q
}

// StreamAdvance implements Stream.
func (m MySQL) StreamAdvance() string {
	return `UPDATE ` + m.Quote(StreamTable) + ` SET pos = ?, txs = txs + ?, changes = changes + ?,
  source_commit = COALESCE(?, source_commit), lag_ms = ?, lag_bytes = ?, applied_at = UTC_TIMESTAMP(6) WHERE plan = ?`
}

// StreamAsyncCommit implements Stream: none; InnoDB's flush at commit
// (innodb_flush_log_at_trx_commit) is the server's, not a transaction's.
func (MySQL) StreamAsyncCommit() string { return "" }

// StreamState implements Stream.
func (m MySQL) StreamState() string {
	return `UPDATE ` + m.Quote(StreamTable) + ` SET state = ? WHERE plan = ?`
}

// StreamApplied implements Stream.
func (m MySQL) StreamApplied(lock bool) string {
	q := `SELECT applied FROM ` + m.Quote(StreamTableTable) + ` WHERE plan = ? AND tbl = ?`
	if lock {
		q += " LOCK IN SHARE MODE"
	}
	return q
}

// StreamBump implements Stream.
func (m MySQL) StreamBump() string {
	return `UPDATE ` + m.Quote(StreamTableTable) + ` SET applied = applied + 1 WHERE plan = ? AND tbl = ?`
}

// StreamUpsert implements Stream.
func (m MySQL) StreamUpsert(table []string, cols, key []string, fence string, rows int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + m.Quote(table...) + " (" + m.quoteList(cols) + ", " + m.Quote(fence) + ") VALUES ")
	row := "(" + strings.Repeat("?, ", len(cols)) + "0)"
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	in := func(c string) string { return "VALUES(" + m.Quote(c) + ")" }
	if m.RowAlias {
		b.WriteString(" AS `new`")
		in = func(c string) string { return "`new`." + m.Quote(c) }
	}
	isKey := map[string]bool{}
	for _, k := range key {
		isKey[k] = true
	}
	var set []string
	for _, c := range cols {
		if !isKey[c] {
			set = append(set, m.Quote(c)+" = "+in(c))
		}
	}
	set = append(set, m.Quote(fence)+" = 0")
	b.WriteString(" ON DUPLICATE KEY UPDATE " + strings.Join(set, ", "))
	return b.String()
}

// StreamUpdate implements Stream.
func (m MySQL) StreamUpdate(table []string, cols, key []string, fence string) string {
	set := make([]string, 0, len(cols)+1)
	for _, c := range cols {
		set = append(set, m.Quote(c)+" = ?")
	}
	set = append(set, m.Quote(fence)+" = 0")
	where := make([]string, len(key))
	for i, k := range key {
		where[i] = m.Quote(k) + " = ?"
	}
	return "UPDATE " + m.Quote(table...) + " SET " + strings.Join(set, ", ") + " WHERE " + strings.Join(where, " AND ")
}
