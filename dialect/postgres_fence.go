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

// FenceBreak implements Dialect. The row's xmax names the transaction that
// locked it (FenceCheck's UPDATE); pg_locks, the session still running it.
// Only migrate's sessions (application_name) that this role may signal
// are ended: pg_terminate_backend fails the whole statement on one it may
// not. The claim that follows waits the moment each takes to exit.
func (p Postgres) FenceBreak() string {
	return `SELECT count(*) FILTER (WHERE pg_terminate_backend(a.pid)) FROM ` + p.Quote(FenceTable) + ` f
JOIN pg_locks l ON l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND l.granted AND l.transactionid = f.xmax
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE f.plan = $1 AND f.tbl = $2 AND f.shard = $3 AND a.pid <> pg_backend_pid() AND a.application_name = 'migrate'
  AND (pg_has_role(a.usesysid, 'MEMBER') OR pg_has_role('pg_signal_backend', 'MEMBER'))`
}

// FenceRead implements Dialect.
func (p Postgres) FenceRead() string {
	return `SELECT token, owner FROM ` + p.Quote(FenceTable) + ` WHERE plan = $1 AND tbl = $2 AND shard = $3`
}
