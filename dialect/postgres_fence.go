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
// are listed. The transaction comes back as an xid8 (the 32-bit xmax
// widened by the epoch of the next transaction id, which is at most one
// wraparound ahead of any running one), for FenceEnd's re-check.
func (p Postgres) FenceBreak() string {
	return `WITH n AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next)
SELECT a.pid, (n.next - ((n.next % 4294967296) - f.xmax::text::bigint + 4294967296) % 4294967296)::text
FROM n, ` + p.Quote(FenceTable) + ` f
JOIN pg_locks l ON l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND l.granted AND l.transactionid = f.xmax
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE f.plan = $1 AND f.tbl = $2 AND f.shard = $3 AND a.pid <> pg_backend_pid() AND a.application_name = 'migrate'
  AND (pg_has_role(a.usesysid, 'MEMBER') OR pg_has_role('pg_signal_backend', 'MEMBER'))`
}

// FenceEnd implements Dialect: the session is ended only while the
// transaction FenceBreak saw it run is still in progress, checked by the
// server just before the signal: one that has since committed (and may
// run the holder's next transaction, or have left its pid to another
// session) is left alone. CASE fixes the order of the two calls.
func (Postgres) FenceEnd() string {
	return `SELECT CASE WHEN pg_xact_status($2::xid8) = 'in progress' THEN pg_terminate_backend($1) ELSE false END`
}

// FenceRead implements Dialect.
func (p Postgres) FenceRead() string {
	return `SELECT token, owner FROM ` + p.Quote(FenceTable) + ` WHERE plan = $1 AND tbl = $2 AND shard = $3`
}
