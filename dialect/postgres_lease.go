package dialect

// pgMs is a timestamptz expression as milliseconds since the Unix epoch.
func pgMs(expr string) string { return `(extract(epoch from ` + expr + `) * 1000)::bigint` }

// LeaseTable implements Lease. lease_until of a free lease is in the past
// (the epoch); the prev_ columns are the holder before the current one.
func (p Postgres) LeaseTable() string {
	return `CREATE TABLE IF NOT EXISTS ` + p.Quote(LeaseTable) + ` (
  name text PRIMARY KEY, owner text NOT NULL DEFAULT '', token bigint NOT NULL DEFAULT 0,
  lease_until timestamptz NOT NULL DEFAULT 'epoch', renewed_at timestamptz, acquired_at timestamptz,
  released boolean NOT NULL DEFAULT false, prev_owner text NOT NULL DEFAULT '', prev_token bigint NOT NULL DEFAULT 0,
  prev_renewed_at timestamptz, prev_released boolean NOT NULL DEFAULT false)`
}

// LeaseInit implements Lease.
func (p Postgres) LeaseInit() string {
	return `INSERT INTO ` + p.Quote(LeaseTable) + ` (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`
}

// LeaseAcquire implements Lease. Every SET reads the row as it was.
func (p Postgres) LeaseAcquire() string {
	return `UPDATE ` + p.Quote(LeaseTable) + ` SET prev_owner = owner, prev_token = token, prev_renewed_at = renewed_at,
  prev_released = released, owner = $1, token = token + 1, lease_until = clock_timestamp() + $2::bigint * interval '1 millisecond',
  renewed_at = clock_timestamp(), acquired_at = clock_timestamp(), released = false
WHERE name = $3 AND lease_until <= clock_timestamp()`
}

// LeaseRenew implements Lease.
func (p Postgres) LeaseRenew() string {
	return `UPDATE ` + p.Quote(LeaseTable) + ` SET lease_until = clock_timestamp() + $1::bigint * interval '1 millisecond', renewed_at = clock_timestamp()
WHERE name = $2 AND owner = $3 AND token = $4 AND lease_until > clock_timestamp()`
}

// LeaseRelease implements Lease.
func (p Postgres) LeaseRelease() string {
	return `UPDATE ` + p.Quote(LeaseTable) + ` SET lease_until = 'epoch', renewed_at = clock_timestamp(), released = true
WHERE name = $1 AND owner = $2 AND token = $3 AND lease_until > clock_timestamp()`
}

// LeaseRead implements Lease.
func (p Postgres) LeaseRead(lock bool) string {
	q := `SELECT owner, token, ` + pgMs(`lease_until - clock_timestamp()`) + `, COALESCE(` + pgMs(`renewed_at`) + `, 0),
  COALESCE(` + pgMs(`acquired_at`) + `, 0), released, prev_owner, prev_token, COALESCE(` + pgMs(`prev_renewed_at`) + `, 0), prev_released
FROM ` + p.Quote(LeaseTable) + ` WHERE name = $1`
	if lock {
		q += ` FOR UPDATE`
	}
	return q
}

// LeaseRaise implements Lease.
func (p Postgres) LeaseRaise() string {
	return `UPDATE ` + p.Quote(LeaseTable) + ` SET token = GREATEST(token, $1) WHERE name = $2`
}

// LeaseForget implements Lease.
func (p Postgres) LeaseForget() string {
	return `DELETE FROM ` + p.Quote(LeaseTable) + ` WHERE name = $1 AND lease_until <= clock_timestamp()`
}
