package dialect

import (
	"strconv"
)

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
