package dialect

import (
	"slices"
	"strings"
)

// where names a table in information_schema: (schema or NULL for the
// connection's database, table).
func (MySQL) where(table []string) (string, []any) {
	cond := "table_schema = COALESCE(?, DATABASE()) AND table_name = ?"
	if len(table) == 2 {
		return cond, []any{table[0], table[1]}
	}
	return cond, []any{nil, table[0]}
}

// Columns implements Dialect. The type is column_type as the server spells
// it: ENUM and SET members keep their case ('PG-13'; 'a' and 'A' may both be
// members under a case-sensitive collation). MariaDB keeps JSON as longtext
// with a json_valid check; its base is reported as "json". The check's text
// quotes the column name as an identifier (a backtick doubled).
func (m MySQL) Columns(table []string) (string, []any) { return m.columnsQuery(table, "") }

// columnsQuery is Columns' query selecting extra (", c.x, c.y": more
// columns of information_schema.columns c) after the four of Columns;
// ReadTable reads a column's whole definition by it.
func (m MySQL) columnsQuery(table []string, extra string) (string, []any) {
	cond, args := m.where(table)
	cond = strings.ReplaceAll(cond, "table_", "c.table_")
	if !m.MariaDB {
		return `SELECT c.column_name, c.column_type, LOWER(c.data_type), c.is_nullable = 'NO'` + extra + `
FROM information_schema.columns c WHERE ` + cond + `
ORDER BY c.ordinal_position`, args
	}
	// The table's checks are read once, joined (a correlated subquery
	// would build MariaDB's information_schema temporary table once per
	// column: slow, and a statement timeout firing while one is built has
	// crashed MariaDB 10.11).
	kcond := "constraint_schema = COALESCE(?, DATABASE()) AND table_name = ?"
	return `SELECT c.column_name, c.column_type, CASE WHEN LOWER(c.data_type) = 'longtext' AND k.check_clause IS NOT NULL THEN 'json' ELSE LOWER(c.data_type) END, c.is_nullable = 'NO'` + extra + `
FROM information_schema.columns c
LEFT JOIN (SELECT DISTINCT check_clause FROM information_schema.check_constraints WHERE ` + kcond + `) k
  ON k.check_clause = CONCAT('json_valid(` + "`" + `', REPLACE(c.column_name, '` + "`" + `', '` + "``" + `'), '` + "`" + `)')
WHERE ` + cond + `
ORDER BY c.ordinal_position`, append(slices.Clone(args), args...)
}

// Collations implements Dialect: only the binary NO PAD collations
// compare bytes (binary, MariaDB's *_nopad_bin, MySQL 8's *_0900_bin;
// *_bin is PAD SPACE: 'b' = 'b '); CHAR drops trailing spaces whatever
// its collation (trims).
func (m MySQL) Collations(table []string) (string, []any) {
	cond, args := m.where(table)
	return `SELECT column_name, collation_name, (collation_name = 'binary'
  OR RIGHT(collation_name, 4) = '_bin' AND (LOCATE('_nopad_', collation_name) > 0 OR LOCATE('_0900_', collation_name) > 0)), trims
FROM (SELECT column_name, collation_name, ordinal_position, LOWER(data_type) = 'char' AS trims
  FROM information_schema.columns WHERE ` + cond + ` AND collation_name IS NOT NULL) c
ORDER BY ordinal_position`, args
}

// TableExists implements Dialect.
func (m MySQL) TableExists(table []string) (string, []any) {
	cond, args := m.where(table)
	return `SELECT COUNT(*) > 0 FROM information_schema.tables WHERE ` + cond, args
}

// UniqueKeys implements Dialect; prefix indexes do not count.
func (m MySQL) UniqueKeys(table []string) (string, []any) {
	cond, args := m.where(table)
	return `SELECT index_name, column_name FROM information_schema.statistics
WHERE ` + cond + ` AND non_unique = 0 AND sub_part IS NULL
ORDER BY index_name, seq_in_index`, args
}

// Connections implements Dialect: Threads_connected from the status table
// of the flavour (MySQL 8 moved it to performance_schema).
func (m MySQL) Connections() string {
	status := "performance_schema.global_status"
	if m.MariaDB {
		status = "information_schema.GLOBAL_STATUS"
	}
	return "SELECT @@max_connections, (SELECT CAST(VARIABLE_VALUE AS SIGNED) FROM " + status + " WHERE VARIABLE_NAME = 'Threads_connected')"
}

// EstimateRows implements Dialect.
func (m MySQL) EstimateRows(table []string) (string, []any) {
	cond, args := m.where(table)
	return `SELECT COALESCE(MAX(table_rows), 0) FROM information_schema.tables WHERE ` + cond, args
}

// CountRows implements Dialect.
func (m MySQL) CountRows(table []string) string { return "SELECT COUNT(*) FROM " + m.Quote(table...) }

// KeyBounds implements Dialect.
func (m MySQL) KeyBounds(table []string, col string) string {
	c := m.Quote(col)
	return "SELECT MIN(" + c + "), MAX(" + c + ") FROM " + m.Quote(table...)
}

// KeyAt implements Dialect.
func (m MySQL) KeyAt(table []string, col string) string {
	c := m.Quote(col)
	return "SELECT " + c + " FROM " + m.Quote(table...) + " ORDER BY " + c + " LIMIT 1 OFFSET ?"
}
