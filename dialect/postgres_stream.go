package dialect

import (
	"strconv"
	"strings"
)

// streamHelpers creates the stream's tables (Helpers).
func (p Postgres) streamHelpers() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + p.Quote(StreamTable) + ` (
  plan text PRIMARY KEY, pos text NOT NULL, start_pos text NOT NULL, state text NOT NULL DEFAULT 'following',
  txs bigint NOT NULL DEFAULT 0, changes bigint NOT NULL DEFAULT 0, source_commit timestamptz,
  applied_at timestamptz, lag_ms bigint NOT NULL DEFAULT 0, lag_bytes bigint NOT NULL DEFAULT 0,
  started_at timestamptz NOT NULL DEFAULT now())`,
		`CREATE TABLE IF NOT EXISTS ` + p.Quote(StreamTableTable) + ` (
  plan text NOT NULL, tbl text NOT NULL, applied bigint NOT NULL DEFAULT 0, PRIMARY KEY (plan, tbl))`,
	}
}

// StreamSchema implements Stream.
func (Postgres) StreamSchema() string { return "SELECT current_schema()" }

// StreamInit implements Stream.
func (p Postgres) StreamInit() string {
	return `INSERT INTO ` + p.Quote(StreamTable) + ` (plan, pos, start_pos) VALUES ($1, $2, $2) ON CONFLICT (plan) DO NOTHING`
}

// StreamTableInit implements Stream.
func (p Postgres) StreamTableInit() string {
	return `INSERT INTO ` + p.Quote(StreamTableTable) + ` (plan, tbl) VALUES ($1, $2) ON CONFLICT (plan, tbl) DO NOTHING`
}

// StreamRead implements Stream.
func (p Postgres) StreamRead(lock bool) string {
	q := `SELECT pos, start_pos, state, txs, changes, source_commit, applied_at, lag_ms, lag_bytes, started_at, now() FROM ` + p.Quote(StreamTable) + ` WHERE plan = $1`
	if lock {
		q += " FOR UPDATE"
	}
	return q
}

// StreamAdvance implements Stream.
func (p Postgres) StreamAdvance() string {
	return `UPDATE ` + p.Quote(StreamTable) + ` SET pos = $1, txs = txs + $2, changes = changes + $3,
  source_commit = COALESCE($4, source_commit), lag_ms = $5, lag_bytes = $6, applied_at = now() WHERE plan = $7`
}

// StreamAsyncCommit implements Stream: what PostgreSQL's own subscription
// does for every transaction it applies (its synchronous_commit defaults to
// off, "safe … because the data will be sent again from the publisher").
func (Postgres) StreamAsyncCommit() string { return "SET LOCAL synchronous_commit = off" }

// StreamState implements Stream.
func (p Postgres) StreamState() string {
	return `UPDATE ` + p.Quote(StreamTable) + ` SET state = $1 WHERE plan = $2`
}

// StreamApplied implements Stream.
func (p Postgres) StreamApplied(lock bool) string {
	q := `SELECT applied FROM ` + p.Quote(StreamTableTable) + ` WHERE plan = $1 AND tbl = $2`
	if lock {
		q += " FOR SHARE"
	}
	return q
}

// StreamBump implements Stream.
func (p Postgres) StreamBump() string {
	return `UPDATE ` + p.Quote(StreamTableTable) + ` SET applied = applied + 1 WHERE plan = $1 AND tbl = $2`
}

// StreamUpsert implements Stream. OVERRIDING SYSTEM VALUE as in Upsert.
func (p Postgres) StreamUpsert(table []string, cols, key []string, fence string, rows int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + p.Quote(table...) + " AS t (" + p.quoteList(cols) + ", " + p.Quote(fence) + ") OVERRIDING SYSTEM VALUE VALUES ")
	n := 0
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for range cols {
			n++
			b.WriteString("$" + strconv.Itoa(n) + ", ")
		}
		b.WriteString("0)")
	}
	isKey := map[string]bool{}
	for _, k := range key {
		isKey[k] = true
	}
	var set []string
	for _, c := range cols {
		if !isKey[c] {
			set = append(set, p.Quote(c)+" = EXCLUDED."+p.Quote(c))
		}
	}
	set = append(set, p.Quote(fence)+" = 0")
	b.WriteString(" ON CONFLICT (" + p.quoteList(key) + ") DO UPDATE SET " + strings.Join(set, ", "))
	return b.String()
}

// StreamUpdate implements Stream.
func (p Postgres) StreamUpdate(table []string, cols, key []string, fence string) string {
	set := make([]string, 0, len(cols)+1)
	for i, c := range cols {
		set = append(set, p.Quote(c)+" = $"+strconv.Itoa(i+1))
	}
	set = append(set, p.Quote(fence)+" = 0")
	where := make([]string, len(key))
	for i, k := range key {
		where[i] = p.Quote(k) + " = $" + strconv.Itoa(len(cols)+i+1)
	}
	return "UPDATE " + p.Quote(table...) + " SET " + strings.Join(set, ", ") + " WHERE " + strings.Join(where, " AND ")
}
