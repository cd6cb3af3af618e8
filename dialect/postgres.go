package dialect

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/migrate-dev/migrate/plans"
)

// Postgres is the dialect of PostgreSQL 15+.
type Postgres struct{}

// Engine implements Dialect.
func (Postgres) Engine() plans.Engine { return plans.Postgres }

// Open implements Dialect. Timeouts are set as startup parameters, so every
// connection of the pool carries them from its first statement.
func (Postgres) Open(dsn plans.DSN, s Session) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn.Secret())
	if err != nil {
		return nil, fmt.Errorf("postgres DSN %s: invalid", dsn) // pgx's text may quote the input
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "migrate"
	if s.IdleInTransaction > 0 {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = ms(s.IdleInTransaction)
	}
	if s.Statement > 0 {
		cfg.RuntimeParams["statement_timeout"] = ms(s.Statement)
	}
	if s.Lock > 0 {
		cfg.RuntimeParams["lock_timeout"] = ms(s.Lock)
	}
	return stdlib.OpenDB(*cfg), nil
}

func ms(d time.Duration) string {
	v := d.Milliseconds()
	if v < 1 {
		v = 1
	}
	return strconv.FormatInt(v, 10)
}

// Quote implements Dialect.
func (Postgres) Quote(ident ...string) string { return pgx.Identifier(ident).Sanitize() }

func (p Postgres) quoteList(cols []string) string { return quoteList(p, cols) }

// regclass is the table name as text for a $1::regclass cast.
func (p Postgres) regclass(table []string) string { return p.Quote(table...) }

// Columns implements Dialect. An enum's base is "enum", a domain's its base
// type's.
func (p Postgres) Columns(table []string) (string, []any) {
	return `SELECT a.attname, format_type(a.atttypid, a.atttypmod),
  CASE WHEN t.typtype = 'e' THEN 'enum' WHEN t.typtype = 'd' THEN format_type(t.typbasetype, NULL) ELSE format_type(a.atttypid, NULL) END,
  a.attnotnull
FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, []any{p.regclass(table)}
}

// TableExists implements Dialect.
func (p Postgres) TableExists(table []string) (string, []any) {
	return `SELECT to_regclass($1) IS NOT NULL`, []any{p.regclass(table)}
}

// UniqueKeys implements Dialect.
func (p Postgres) UniqueKeys(table []string) (string, []any) {
	return `SELECT c.relname, a.attname
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = $1::regclass AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
ORDER BY c.relname, k.n`, []any{p.regclass(table)}
}

// Connections implements Dialect.
func (Postgres) Connections() string {
	return `SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int,
  (SELECT count(*)::int FROM pg_catalog.pg_stat_activity WHERE backend_type = 'client backend')`
}

// EstimateRows implements Dialect.
func (p Postgres) EstimateRows(table []string) (string, []any) {
	return `SELECT GREATEST(reltuples, 0)::bigint FROM pg_catalog.pg_class WHERE oid = $1::regclass`, []any{p.regclass(table)}
}

// CountRows implements Dialect.
func (p Postgres) CountRows(table []string) string {
	return "SELECT count(*) FROM " + p.Quote(table...)
}

// KeyBounds implements Dialect.
func (p Postgres) KeyBounds(table []string, col string) string {
	c := p.Quote(col)
	return "SELECT min(" + c + "), max(" + c + ") FROM " + p.Quote(table...)
}

// KeyAt implements Dialect.
func (p Postgres) KeyAt(table []string, col string) string {
	c := p.Quote(col)
	return "SELECT " + c + " FROM " + p.Quote(table...) + " ORDER BY " + c + " LIMIT 1 OFFSET $1"
}

// SelectPage implements Dialect with a row-value comparison.
func (p Postgres) SelectPage(table []string, cols, key []string, after bool, r Range, limit int) Query {
	var q Query
	var b strings.Builder
	b.WriteString("SELECT " + p.quoteList(cols) + " FROM " + p.Quote(table...))
	var where []string
	next := func(arg int) string { q.Args = append(q.Args, arg); return "$" + strconv.Itoa(len(q.Args)) }
	if after {
		ph := make([]string, len(key))
		for i := range key {
			ph[i] = next(i)
		}
		where = append(where, "("+p.quoteList(key)+") > ("+strings.Join(ph, ", ")+")")
	}
	if r.Lo != nil {
		where = append(where, p.Quote(key[0])+" > "+next(len(key)))
	}
	if r.Hi != nil {
		where = append(where, p.Quote(key[0])+" <= "+next(len(key)+1))
	}
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY " + p.quoteList(key) + " LIMIT " + strconv.Itoa(limit))
	q.SQL = b.String()
	return q
}

// SelectLast implements Dialect with a row-value comparison.
func (p Postgres) SelectLast(table []string, cols, key []string, r Range, limit int) Query {
	var q Query
	next := func(arg int) string { q.Args = append(q.Args, arg); return "$" + strconv.Itoa(len(q.Args)) }
	ph := make([]string, len(key))
	desc := make([]string, len(key))
	for i, k := range key {
		ph[i] = next(i)
		desc[i] = p.Quote(k) + " DESC"
	}
	where := []string{"(" + p.quoteList(key) + ") <= (" + strings.Join(ph, ", ") + ")"}
	if r.Lo != nil {
		where = append(where, p.Quote(key[0])+" > "+next(len(key)))
	}
	if r.Hi != nil {
		where = append(where, p.Quote(key[0])+" <= "+next(len(key)+1))
	}
	q.SQL = "SELECT " + p.quoteList(cols) + " FROM " + p.Quote(table...) + " WHERE " + strings.Join(where, " AND ") +
		" ORDER BY " + strings.Join(desc, ", ") + " LIMIT " + strconv.Itoa(limit)
	return q
}

// Upsert implements Dialect. The token is one parameter after the row
// values, shared by every row. xmax = 0 tells an inserted row from an updated
// one; rows whose stored token is newer are neither.
func (p Postgres) Upsert(table []string, cols, key []string, fence string, rows int) Upsert {
	var b strings.Builder
	tok := "$" + strconv.Itoa(rows*len(cols)+1)
	b.WriteString("WITH w AS (INSERT INTO " + p.Quote(table...) + " AS t (" + p.quoteList(cols) + ", " + p.Quote(fence) + ") VALUES ")
	n := 0
	for r := 0; r < rows; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for range cols {
			n++
			b.WriteString("$" + strconv.Itoa(n) + ", ")
		}
		b.WriteString(tok + ")")
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
	f := p.Quote(fence)
	set = append(set, f+" = EXCLUDED."+f)
	b.WriteString(" ON CONFLICT (" + p.quoteList(key) + ") DO UPDATE SET " + strings.Join(set, ", "))
	b.WriteString(" WHERE t." + f + " <= EXCLUDED." + f)
	b.WriteString(" RETURNING (xmax = 0) AS ins) SELECT count(*) FILTER (WHERE ins), count(*) FILTER (WHERE NOT ins) FROM w")
	return Upsert{SQL: b.String(), Returns: true}
}

// MaxParams implements Dialect.
func (Postgres) MaxParams() int { return 65535 }

// BoundTx implements Dialect with transaction-local settings.
func (Postgres) BoundTx(remaining time.Duration) (string, []any) {
	return `SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true),
  set_config('idle_in_transaction_session_timeout', $1, true)`, []any{ms(remaining)}
}

// UnboundTx implements Dialect: BoundTx's settings end with the transaction.
func (Postgres) UnboundTx() string { return "" }

// CreateTable implements Dialect.
func (p Postgres) CreateTable(table []string, cols []Column, key []string, fence string) string {
	defs := make([]string, 0, len(cols)+2)
	for _, c := range cols {
		d := p.Quote(c.Name) + " " + c.Type
		if c.NotNull {
			d += " NOT NULL"
		}
		defs = append(defs, d)
	}
	defs = append(defs, p.Quote(fence)+" bigint NOT NULL DEFAULT 0", "PRIMARY KEY ("+p.quoteList(key)+")")
	return "CREATE TABLE " + p.Quote(table...) + " (\n  " + strings.Join(defs, ",\n  ") + "\n)"
}

// AddFenceColumn implements Dialect.
func (p Postgres) AddFenceColumn(table []string, fence string) string {
	return "ALTER TABLE " + p.Quote(table...) + " ADD COLUMN IF NOT EXISTS " + p.Quote(fence) + " bigint NOT NULL DEFAULT 0"
}

// Helpers implements Dialect.
func (p Postgres) Helpers() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + p.Quote(FenceTable) + ` (
  plan text NOT NULL, tbl text NOT NULL, shard integer NOT NULL,
  token bigint NOT NULL, owner text NOT NULL, claimed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (plan, tbl, shard))`,
		`CREATE TABLE IF NOT EXISTS ` + p.Quote(CheckpointTable) + ` (
  plan text NOT NULL, tbl text NOT NULL, shard integer NOT NULL,
  lo_key text, hi_key text, last_key text,
  rows_done bigint NOT NULL DEFAULT 0, token bigint NOT NULL DEFAULT 0,
  state text NOT NULL DEFAULT 'pending', updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (plan, tbl, shard))`,
	}
}

// SetupLock implements Dialect.
func (Postgres) SetupLock(name string) (string, []any) {
	return `SELECT pg_try_advisory_lock(hashtext($1))::int`, []any{name}
}

// SetupUnlock implements Dialect.
func (Postgres) SetupUnlock(name string) (string, []any) {
	return `SELECT pg_advisory_unlock(hashtext($1))`, []any{name}
}

// FenceClaim implements Dialect.
func (p Postgres) FenceClaim() string {
	return `INSERT INTO ` + p.Quote(FenceTable) + ` AS f (plan, tbl, shard, token, owner) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (plan, tbl, shard) DO UPDATE SET token = EXCLUDED.token, owner = EXCLUDED.owner, claimed_at = now()
WHERE f.token < EXCLUDED.token`
}

// FenceFloor implements Dialect.
func (p Postgres) FenceFloor() string {
	return `INSERT INTO ` + p.Quote(FenceTable) + ` (plan, tbl, shard, token, owner) VALUES ($1, $2, $3, $4, '')
ON CONFLICT (plan, tbl, shard) DO NOTHING`
}

// MaxToken implements Dialect.
func (p Postgres) MaxToken(table []string, fence string) string {
	return "SELECT COALESCE(MAX(" + p.Quote(fence) + "), 0) FROM " + p.Quote(table...)
}

// FenceCheck implements Dialect: an UPDATE, so PostgreSQL re-evaluates the
// condition on the newest row version after waiting for a concurrent claim.
func (p Postgres) FenceCheck() string {
	return `UPDATE ` + p.Quote(FenceTable) + ` SET token = token
WHERE plan = $1 AND tbl = $2 AND shard = $3 AND token = $4 AND owner = $5`
}

// FenceRead implements Dialect.
func (p Postgres) FenceRead() string {
	return `SELECT token, owner FROM ` + p.Quote(FenceTable) + ` WHERE plan = $1 AND tbl = $2 AND shard = $3`
}

// CheckpointInit implements Dialect.
func (p Postgres) CheckpointInit() string {
	return `INSERT INTO ` + p.Quote(CheckpointTable) + ` (plan, tbl, shard, lo_key, hi_key) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (plan, tbl, shard) DO NOTHING`
}

// CheckpointRead implements Dialect.
func (p Postgres) CheckpointRead(lock bool) string {
	q := `SELECT lo_key, hi_key, last_key, rows_done, token, state, updated_at FROM ` + p.Quote(CheckpointTable) + `
WHERE plan = $1 AND tbl = $2 AND shard = $3`
	if lock {
		q += " FOR UPDATE"
	}
	return q
}

// CheckpointAdvance implements Dialect.
func (p Postgres) CheckpointAdvance() string {
	return `UPDATE ` + p.Quote(CheckpointTable) + ` SET last_key = $1, rows_done = $2, token = $3,
  state = 'running', updated_at = now()
WHERE plan = $4 AND tbl = $5 AND shard = $6 AND rows_done IN ($7, $8)`
}

// CheckpointState implements Dialect.
func (p Postgres) CheckpointState() string {
	return `UPDATE ` + p.Quote(CheckpointTable) + ` SET state = $1, token = $2, updated_at = now()
WHERE plan = $3 AND tbl = $4 AND shard = $5`
}

// CheckpointResume implements Dialect.
func (p Postgres) CheckpointResume(byTable, byShard bool) string {
	q := `UPDATE ` + p.Quote(CheckpointTable) + ` SET state = 'pending', updated_at = now() WHERE plan = $1 AND state = 'halted'`
	n := 1
	if byTable {
		n++
		q += " AND tbl = $" + strconv.Itoa(n)
	}
	if byShard {
		n++
		q += " AND shard = $" + strconv.Itoa(n)
	}
	return q
}

// CheckpointList implements Dialect.
func (p Postgres) CheckpointList() string {
	return `SELECT tbl, shard, state, rows_done, last_key, token, updated_at FROM ` + p.Quote(CheckpointTable) + `
WHERE plan = $1 ORDER BY tbl, shard`
}

// ScanOrdered implements Dialect: text key columns are ordered by the
// bytes of their text form (::text COLLATE "C", which works for any type:
// uuid, inet, enums).
func (p Postgres) ScanOrdered(table []string, cols []Column, key []string, textKey []bool, lo, hi bool) Query {
	order := make([]string, len(key))
	for i, k := range key {
		order[i] = p.Quote(k)
		if textKey[i] {
			order[i] += `::text COLLATE "C"`
		}
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	var q Query
	q.SQL = "SELECT " + p.quoteList(names) + " FROM " + p.Quote(table...) + p.keyRange(&q, key, lo, hi) +
		" ORDER BY " + strings.Join(order, ", ")
	return q
}

// keyRange is the WHERE clause " WHERE (key) > (lo) AND (key) <= (hi)" for
// the bounds asked, adding their parameters to q: lo's parts are the logical
// values 0..n-1, hi's n..2n-1.
func (p Postgres) keyRange(q *Query, key []string, lo, hi bool) string {
	var where []string
	bound := func(first int, op string) {
		ph := make([]string, len(key))
		for i := range key {
			q.Args = append(q.Args, first+i)
			ph[i] = "$" + strconv.Itoa(len(q.Args))
		}
		where = append(where, "("+p.quoteList(key)+")"+op+"("+strings.Join(ph, ", ")+")")
	}
	if lo {
		bound(0, " > ")
	}
	if hi {
		bound(len(key), " <= ")
	}
	if len(where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(where, " AND ")
}

// ChunkEnd implements Dialect.
func (p Postgres) ChunkEnd(table []string, key []string, lo bool, n int) Query {
	var q Query
	q.SQL = "SELECT " + p.quoteList(key) + " FROM " + p.Quote(table...) + p.keyRange(&q, key, lo, false) +
		" ORDER BY " + p.quoteList(key) + " LIMIT 1 OFFSET " + strconv.Itoa(n-1)
	return q
}

// Checksum implements Dialect: md5 of the rows' record texts in key order,
// where NULL and an empty string differ and every value is quoted, so that
// the texts joined need no separator. string_agg takes them in the sorted
// subquery's order (an ORDER BY inside the aggregate would sort again); were
// it ever not so, the hashes would differ and the rows be compared, which
// costs time, never a wrong answer. timestamptz in UTC, so the session's
// time zone does not matter; floats by their binary form, exact whatever
// extra_float_digits says.
func (p Postgres) Checksum(table []string, cols []Column, key []string, lo, hi bool) Query {
	vals := make([]string, len(cols))
	for i, c := range cols {
		vals[i] = p.Quote(c.Name)
		switch c.Base {
		case "timestamp with time zone":
			vals[i] = "(" + vals[i] + " AT TIME ZONE 'UTC')"
		case "double precision":
			vals[i] = "float8send(" + vals[i] + ")"
		case "real":
			vals[i] = "float4send(" + vals[i] + ")"
		}
	}
	var q Query
	q.SQL = "SELECT count(*), coalesce(md5(string_agg(r, '')), '') FROM (SELECT row(" + strings.Join(vals, ", ") +
		")::text AS r FROM " + p.Quote(table...) + p.keyRange(&q, key, lo, hi) + " ORDER BY " + p.quoteList(key) + ") s"
	return q
}

// OrderedByValue implements Dialect.
func (Postgres) OrderedByValue(c Column) bool {
	switch c.Base {
	case "smallint", "integer", "bigint", "numeric", "date", "uuid", "bytea",
		"timestamp without time zone", "timestamp with time zone", "time without time zone":
		return true
	}
	return false
}

// keysIn is "(k1, k2) IN (($1, $2), …)" for n keys, parameters from $1.
func (p Postgres) keysIn(key []string, n int) string {
	var b strings.Builder
	b.WriteString("(" + p.quoteList(key) + ") IN (")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j := range key {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("$" + strconv.Itoa(i*len(key)+j+1))
		}
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String()
}

// SelectByKeys implements Dialect.
func (p Postgres) SelectByKeys(table []string, cols, key []string, n int) string {
	return "SELECT " + p.quoteList(cols) + " FROM " + p.Quote(table...) + " WHERE " + p.keysIn(key, n)
}

// DeleteByKeys implements Dialect.
func (p Postgres) DeleteByKeys(table []string, key []string, n int) string {
	return "DELETE FROM " + p.Quote(table...) + " WHERE " + p.keysIn(key, n)
}

// DrillCount implements Dialect.
func (p Postgres) DrillCount(table, key []string, fence string, after bool, r Range) Query {
	var q Query
	ph := func(arg int) string { q.Args = append(q.Args, arg); return "$" + strconv.Itoa(len(q.Args)) }
	sel := "SELECT count(*), count(*) FILTER (WHERE " + p.Quote(fence) + " < " + ph(len(key)+2) + ") FROM " + p.Quote(table...)
	q.SQL = sel + drillWhere(p, key, after, r, ph)
	return q
}

// DrillDropTable implements Dialect.
func (p Postgres) DrillDropTable(table []string) string {
	return "DROP TABLE IF EXISTS " + p.Quote(table...)
}

// DrillForget implements Dialect.
func (p Postgres) DrillForget() []string {
	return []string{
		"DELETE FROM " + p.Quote(CheckpointTable) + " WHERE plan = $1",
		"DELETE FROM " + p.Quote(FenceTable) + " WHERE plan = $1",
	}
}
