package dialect

// postLoadHelper creates the post-load steps' table (Helpers).
func (p Postgres) postLoadHelper() string {
	return `CREATE TABLE IF NOT EXISTS ` + p.Quote(PostLoadTable) + ` (
  plan text NOT NULL, seq integer NOT NULL, kind text NOT NULL, tbl text NOT NULL, name text NOT NULL,
  stmt text NOT NULL, exists_sql text NOT NULL, exists_args text NOT NULL,
  state text NOT NULL DEFAULT 'pending', token bigint NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (plan, seq))`
}

// PostLoadInsert implements PostLoad.
func (p Postgres) PostLoadInsert() string {
	return `INSERT INTO ` + p.Quote(PostLoadTable) + ` (plan, seq, kind, tbl, name, stmt, exists_sql, exists_args) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
}

// PostLoadList implements PostLoad.
func (p Postgres) PostLoadList() string {
	return `SELECT seq, kind, tbl, name, stmt, exists_sql, exists_args, state FROM ` + p.Quote(PostLoadTable) + ` WHERE plan = $1` + postLoadOrder
}

// PostLoadDone implements PostLoad.
func (p Postgres) PostLoadDone() string {
	return `UPDATE ` + p.Quote(PostLoadTable) + ` SET state = 'done', token = $1, updated_at = now() WHERE plan = $2 AND seq = $3`
}

// PostLoadState implements PostLoad.
func (p Postgres) PostLoadState() string {
	return `UPDATE ` + p.Quote(PostLoadTable) + ` SET state = $1, token = $2, updated_at = now() WHERE plan = $3 AND seq = 0`
}

// PostLoadResume implements PostLoad.
func (p Postgres) PostLoadResume() string {
	return `UPDATE ` + p.Quote(PostLoadTable) + ` SET state = 'pending', updated_at = now() WHERE plan = $1 AND seq = 0 AND state = 'halted'`
}
