package dialect

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
