package dialect

// regclass is the table name as text for a $1::regclass cast.
func (p Postgres) regclass(table []string) string { return p.Quote(table...) }

// Columns implements Dialect. An enum's base is "enum", a domain's its base
// type's.
func (p Postgres) Columns(table []string) (string, []any) {
	return `SELECT ` + pgColumnSelect + pgColumnFrom + `
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, []any{p.regclass(table)}
}

// pgColumnSelect is the four columns of Columns (name, type, base, not
// null) from pg_attribute a joined with its type t; ReadTable selects
// more after it.
const pgColumnSelect = `a.attname, format_type(a.atttypid, a.atttypmod),
  CASE WHEN t.typtype = 'e' THEN 'enum' WHEN t.typtype = 'd' THEN format_type(t.typbasetype, NULL) ELSE format_type(a.atttypid, NULL) END,
  a.attnotnull`

// pgColumnFrom is the FROM of pgColumnSelect.
const pgColumnFrom = `
FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid`

// Collations implements Dialect: a deterministic collation compares bytes
// (its ties are broken by them); character(n) ignores trailing spaces
// whatever its collation (trims).
func (p Postgres) Collations(table []string) (string, []any) {
	return `SELECT attname, collname, collisdeterministic, trims
FROM (SELECT a.attname, a.attnum, co.collname, co.collisdeterministic,
    COALESCE(NULLIF(t.typbasetype, 0), a.atttypid) = 'pg_catalog.bpchar'::regtype AS trims` + pgColumnFrom + `
  JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
  WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped) c
ORDER BY attnum`, []any{p.regclass(table)}
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
