package dialect

// recordsHelpers creates the takeover and progress tables (Helpers).
func (p Postgres) recordsHelpers() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + p.Quote(TakeoverTable) + ` (
  plan text NOT NULL, tbl text NOT NULL, shard integer NOT NULL, token bigint NOT NULL,
  at timestamptz NOT NULL DEFAULT clock_timestamp(), record text NOT NULL,
  PRIMARY KEY (plan, tbl, shard, token))`,
		`CREATE TABLE IF NOT EXISTS ` + p.Quote(ProgressTable) + ` (
  plan text NOT NULL, tbl text NOT NULL, shard integer NOT NULL, owner text NOT NULL,
  rows_per_sec double precision NOT NULL, eta_ms bigint NOT NULL, table_rows bigint NOT NULL,
  kept_until timestamptz NOT NULL, PRIMARY KEY (plan, tbl, shard))`,
	}
}

// TakeoverAdd implements Records.
func (p Postgres) TakeoverAdd() string {
	return `INSERT INTO ` + p.Quote(TakeoverTable) + ` (plan, tbl, shard, token, record) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (plan, tbl, shard, token) DO NOTHING`
}

// TakeoverNote implements Records.
func (p Postgres) TakeoverNote() string {
	return `UPDATE ` + p.Quote(TakeoverTable) + ` SET record = $1 WHERE plan = $2 AND tbl = $3 AND shard = $4 AND token = $5`
}

// TakeoverPrune implements Records.
func (p Postgres) TakeoverPrune() string {
	return `DELETE FROM ` + p.Quote(TakeoverTable) + ` WHERE plan = $1 AND tbl = $2 AND shard = $3
  AND at < clock_timestamp() - $4::bigint * interval '1 millisecond'`
}

// TakeoverCount implements Records.
func (p Postgres) TakeoverCount() string {
	return `SELECT count(*) FROM ` + p.Quote(TakeoverTable) + ` WHERE plan = $1 AND tbl = $2 AND shard = $3
  AND at > clock_timestamp() - $4::bigint * interval '1 millisecond'`
}

// TakeoverLast implements Records.
func (p Postgres) TakeoverLast() string {
	return `SELECT record FROM ` + p.Quote(TakeoverTable) + ` WHERE plan = $1 AND tbl = $2 AND shard = $3
ORDER BY at DESC, token DESC LIMIT 1`
}

// ProgressPut implements Records.
func (p Postgres) ProgressPut() string {
	return `INSERT INTO ` + p.Quote(ProgressTable) + ` AS r (plan, tbl, shard, owner, rows_per_sec, eta_ms, table_rows, kept_until)
VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp() + $8::bigint * interval '1 millisecond')
ON CONFLICT (plan, tbl, shard) DO UPDATE SET owner = EXCLUDED.owner, rows_per_sec = EXCLUDED.rows_per_sec,
  eta_ms = EXCLUDED.eta_ms, table_rows = EXCLUDED.table_rows, kept_until = EXCLUDED.kept_until`
}

// ProgressGet implements Records.
func (p Postgres) ProgressGet() string {
	return `SELECT owner, rows_per_sec, eta_ms, table_rows FROM ` + p.Quote(ProgressTable) + `
WHERE plan = $1 AND tbl = $2 AND shard = $3 AND kept_until > clock_timestamp()`
}
