package dialect

import (
	"strings"
)

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
	return append([]string{
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
		p.postLoadHelper(),
	}, append(append(p.recordsHelpers(), p.streamHelpers()...), p.outboxHelpers()...)...)
}

// SetupLock implements Dialect.
func (Postgres) SetupLock(name string) (string, []any) {
	return `SELECT pg_try_advisory_lock(hashtext($1))::int`, []any{name}
}

// SetupUnlock implements Dialect.
func (Postgres) SetupUnlock(name string) (string, []any) {
	return `SELECT pg_advisory_unlock(hashtext($1))`, []any{name}
}

// MaxToken implements Dialect.
func (p Postgres) MaxToken(table []string, fence string) string {
	return "SELECT COALESCE(MAX(" + p.Quote(fence) + "), 0) FROM " + p.Quote(table...)
}

// DropTable implements Dialect.
func (p Postgres) DropTable(table []string) string {
	return "DROP TABLE IF EXISTS " + p.Quote(table...)
}

// TransactionalDDL implements Dialect.
func (Postgres) TransactionalDDL() bool { return true }

// UpsertMatchesAnyUnique implements Dialect: ON CONFLICT names the key.
func (Postgres) UpsertMatchesAnyUnique() bool { return false }

// BytewiseColumn implements Dialect: collation "C" (character(n) becomes
// character varying(n)).
func (p Postgres) BytewiseColumn(table []string, c Column) string {
	typ := c.Type
	if c.Base == "character" {
		typ = strings.Replace(typ, "character", "character varying", 1)
	}
	return "ALTER TABLE " + p.Quote(table...) + " ALTER COLUMN " + p.Quote(c.Name) + " TYPE " + typ + ` COLLATE "C"`
}

// KeysetKey implements Dialect: every PostgreSQL type sorts as it compares.
func (Postgres) KeysetKey(Column) string { return "" }
