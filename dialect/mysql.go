package dialect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"fmt"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/migrate-dev/migrate/plans"
)

// MySQL is the dialect of MySQL 8+ and MariaDB 10.11+. Detect picks the
// upsert syntax: MariaDB and MySQL before 8.0.19 read the incoming row with
// VALUES(col); MySQL 8.0.19+ names it with a row alias (VALUES() is
// deprecated there). Collation is the binary NO PAD one of each server.
type MySQL struct {
	RowAlias bool   // INSERT … AS new ON DUPLICATE KEY UPDATE c = new.c
	MariaDB  bool   // MariaDB: JSON columns are longtext with a json_valid check
	Version  string // the server's VERSION()
	floats   *floatCols
}

// floatCols are the FLOAT columns of the tables a MySQL was given by
// WithColumns: column names by quoted table name. One is never changed
// once made (a MySQL is copied freely, and read by every shard at once).
type floatCols map[string]map[string]bool

// withColumns implements columnAware: it keeps table's FLOAT columns.
func (m MySQL) withColumns(table []string, cols []Column) Dialect {
	next := floatCols{}
	if m.floats != nil {
		maps.Copy(next, *m.floats)
	}
	set := map[string]bool{}
	for _, c := range cols {
		if c.Base == "float" {
			set[c.Name] = true
		}
	}
	next[m.Quote(table...)] = set
	m.floats = &next
	return m
}

// asDouble reads a FLOAT column (quoted) as a double: the widening is
// exact, and a double goes exactly by either protocol, whereas the text
// protocol (a statement without bind parameters, or every statement with
// interpolateParams=true) sends a FLOAT with six significant digits.
func asDouble(col string) string { return col + " + 0e0" }

// selectList is cols of table quoted, the FLOAT columns WithColumns named
// read as doubles.
func (m MySQL) selectList(table []string, cols []string) string {
	var floats map[string]bool
	if m.floats != nil {
		floats = (*m.floats)[m.Quote(table...)]
	}
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = m.Quote(c)
		if floats[c] {
			sel[i] = asDouble(sel[i])
		}
	}
	return strings.Join(sel, ", ")
}

// Engine implements Dialect.
func (MySQL) Engine() plans.Engine { return plans.MySQL }

// Open implements Dialect. Sessions read and write times in UTC, run in
// strict mode, and carry the F3 timeouts as session variables set on
// connect. (Lease transactions ask for READ COMMITTED when they begin.)
func (MySQL) Open(dsn plans.DSN, s Session) (*sql.DB, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ParseTime = !s.RawTimes
	cfg.Loc = time.UTC
	// An ON DUPLICATE KEY UPDATE that changed nothing must report no
	// affected row: the strict fence claim depends on it.
	cfg.ClientFoundRows = false
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"
	idle := max(int64(s.IdleInTransaction/time.Second), 1)
	if s.IdleInTransaction > 0 {
		cfg.Params["wait_timeout"] = strconv.FormatInt(idle, 10)
	}
	if s.Lock > 0 {
		// A lock waiter outwaits a silent holder's session by a second
		// (MySQL counts both in whole seconds).
		lock := max(int64((s.Lock+time.Second-1)/time.Second), idle+1)
		cfg.Params["innodb_lock_wait_timeout"] = strconv.FormatInt(lock, 10)
	}
	if s.Statement > 0 {
		// A client that stops sending or reading in the middle of a
		// statement (LOAD DATA LOCAL INFILE) is waited for no longer than
		// a statement may run.
		net := strconv.FormatInt(max(int64(s.Statement/time.Second), 1), 10)
		cfg.Params["net_read_timeout"], cfg.Params["net_write_timeout"] = net, net
	}
	cfg.Collation = "utf8mb4_general_ci" // the connection's; columns keep their own
	// Room for a verification chunk's rows in one GROUP_CONCAT (it is cut
	// at max_allowed_packet all the same, which Checksum detects).
	cfg.Params["group_concat_max_len"] = "1073741824"
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql DSN %s: invalid", dsn)
	}
	return sql.OpenDB(conn), nil
}

// mysqlConfig turns a mysql:// URL or a native DSN into a driver config.
// Besides the driver's parameters (tls=true verifies the server against the
// system's roots) it takes tls-ca=/path/ca.pem: TLS verified against that
// CA file (see useTLSCA).
func mysqlConfig(dsn plans.DSN) (*mysql.Config, error) {
	var cfg *mysql.Config
	if dsn.Native() {
		c, err := mysql.ParseDSN(dsn.Secret())
		if err != nil {
			return nil, fmt.Errorf("mysql DSN %s: invalid", dsn) // the driver's text may quote the input
		}
		cfg = c
	} else {
		// The URL's query holds driver parameters (tls=…, timeout=…): let
		// the driver parse them, then set who and where from the URL.
		c, err := mysql.ParseDSN("/?" + dsn.Query().Encode())
		if err != nil {
			return nil, fmt.Errorf("mysql DSN %s: invalid parameters", dsn)
		}
		cfg = c
		cfg.User, cfg.Passwd, cfg.DBName = dsn.User(), dsn.Password(), dsn.Database()
		port := dsn.Port()
		if port == "" {
			port = "3306"
		}
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(dsn.Host(), port)
		// ParseDSN named the TLS server after its default address
		// (127.0.0.1): the certificate must be checked against the URL's host.
		if cfg.TLS != nil && !cfg.TLS.InsecureSkipVerify {
			cfg.TLS.ServerName = dsn.Host()
		}
	}
	if err := useTLSCA(cfg, dsn); err != nil {
		return nil, err
	}
	return cfg, nil
}

// tlsCAParam names the DSN parameter of a CA file; it is ours, never sent
// to the server as a session variable.
const tlsCAParam = "tls-ca"

// useTLSCA takes tls-ca=FILE out of cfg's parameters, if there, and makes
// the connection TLS (1.2 or later) with the server's certificate verified
// against the PEM certificates in FILE for the DSN's host name. It goes
// with no tls parameter or tls=true; any other tls value is an error.
func useTLSCA(cfg *mysql.Config, dsn plans.DSN) error {
	path, ok := cfg.Params[tlsCAParam]
	if !ok {
		return nil
	}
	delete(cfg.Params, tlsCAParam)
	if path == "" {
		return fmt.Errorf("mysql DSN %s: %s is empty; give the path of a PEM CA file", dsn, tlsCAParam)
	}
	switch cfg.TLSConfig {
	case "", "true":
	default:
		return fmt.Errorf("mysql DSN %s: %s goes with tls=true or no tls parameter", dsn, tlsCAParam)
	}
	var host string
	switch cfg.Net {
	case "tcp", "tcp4", "tcp6":
		h, _, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			h = cfg.Addr
		}
		host = h
	default:
		return fmt.Errorf("mysql DSN %s: %s needs a TCP address (the certificate is checked against the host name)", dsn, tlsCAParam)
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("mysql DSN %s: %s: %w", dsn, tlsCAParam, err) // the path and why: no secret
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("mysql DSN %s: %s %s holds no PEM certificate", dsn, tlsCAParam, path)
	}
	cfg.TLSConfig = ""
	cfg.TLS = &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12}
	return nil
}

// Detect implements Detector from VERSION().
func (MySQL) Detect(ctx context.Context, db *sql.DB) (Dialect, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return nil, err
	}
	return mysqlFor(v), nil
}

// mysqlFor is the dialect of a server version string.
func mysqlFor(version string) MySQL {
	m := MySQL{Version: version, MariaDB: strings.Contains(strings.ToLower(version), "mariadb")}
	m.RowAlias = !m.MariaDB && versionAtLeast(version, 8, 0, 19)
	return m
}

func versionAtLeast(v string, want ...int) bool {
	parts := strings.SplitN(strings.SplitN(v, "-", 2)[0], ".", 3)
	for i, w := range want {
		if i >= len(parts) {
			return false
		}
		n, _ := strconv.Atoi(parts[i])
		if n != w {
			return n > w
		}
	}
	return true
}

// Quote implements Dialect: backticks, a backtick inside doubled.
func (MySQL) Quote(ident ...string) string {
	q := make([]string, len(ident))
	for i, s := range ident {
		q[i] = "`" + strings.ReplaceAll(s, "`", "``") + "`"
	}
	return strings.Join(q, ".")
}

func (m MySQL) quoteList(cols []string) string { return quoteList(m, cols) }

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
func (m MySQL) Columns(table []string) (string, []any) {
	cond, args := m.where(table)
	base := "LOWER(c.data_type)"
	if m.MariaDB {
		base = `CASE WHEN LOWER(c.data_type) = 'longtext' AND EXISTS (SELECT 1 FROM information_schema.check_constraints k
  WHERE k.constraint_schema = c.table_schema AND k.table_name = c.table_name
  AND k.check_clause = CONCAT('json_valid(` + "`" + `', REPLACE(c.column_name, '` + "`" + `', '` + "``" + `'), '` + "`" + `)')) THEN 'json' ELSE LOWER(c.data_type) END`
	}
	return `SELECT c.column_name, c.column_type, ` + base + `, c.is_nullable = 'NO'
FROM information_schema.columns c WHERE ` + strings.ReplaceAll(cond, "table_", "c.table_") + `
ORDER BY c.ordinal_position`, args
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

// SelectPage implements Dialect. The keyset condition is spelled out
// (k1 > ? OR (k1 = ? AND k2 > ?) …) behind k1 >= ?, which MySQL's range
// optimizer uses; a row-value comparison is not always indexed there.
func (m MySQL) SelectPage(table []string, cols, key []string, after bool, r Range, limit int) Query {
	var q Query
	ph := func(arg int) string { q.Args = append(q.Args, arg); return "?" }
	var where []string
	if after {
		where = append(where, m.keyset(key, 0, false, ph))
	}
	if r.Lo != nil {
		where = append(where, m.Quote(key[0])+" > "+ph(len(key)))
	}
	if r.Hi != nil {
		where = append(where, m.Quote(key[0])+" <= "+ph(len(key)+1))
	}
	var b strings.Builder
	b.WriteString("SELECT " + m.selectList(table, cols) + " FROM " + m.Quote(table...))
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY " + m.quoteList(key) + " LIMIT " + strconv.Itoa(limit))
	q.SQL = b.String()
	return q
}

// keyset compares the key with the key given as logical values first…:
// key > given, or key <= given when upTo. Composite keys are spelled out
// behind a condition on k1 alone, which MySQL's range optimizer uses; a
// row-value comparison is not always indexed there:
// k1 >= ? AND (k1 > ? OR (k1 = ? AND k2 > ?) …), and for upTo
// k1 <= ? AND (k1 < ? OR (k1 = ? AND k2 < ?) … OR (all equal)).
func (m MySQL) keyset(key []string, first int, upTo bool, ph func(int) string) string {
	op, strict := " > ", " >= "
	if upTo {
		op, strict = " < ", " <= "
	}
	if len(key) == 1 {
		if upTo {
			return m.Quote(key[0]) + " <= " + ph(first)
		}
		return m.Quote(key[0]) + " > " + ph(first)
	}
	lead := m.Quote(key[0]) + strict + ph(first) // placeholders in order
	eq := func(n int) []string {
		var and []string
		for j := range n {
			and = append(and, m.Quote(key[j])+" = "+ph(first+j))
		}
		return and
	}
	var or []string
	for i := range key {
		or = append(or, "("+strings.Join(append(eq(i), m.Quote(key[i])+op+ph(first+i)), " AND ")+")")
	}
	if upTo {
		or = append(or, "("+strings.Join(eq(len(key)), " AND ")+")")
	}
	return lead + " AND (" + strings.Join(or, " OR ") + ")"
}

// SelectLast implements Dialect, the keyset condition spelled out as in
// SelectPage: k1 <= ? AND (k1 < ? OR (k1 = ? AND k2 < ?) … OR (all equal)).
func (m MySQL) SelectLast(table []string, cols, key []string, r Range, limit int) Query {
	var q Query
	ph := func(arg int) string { q.Args = append(q.Args, arg); return "?" }
	where := []string{m.keyset(key, 0, true, ph)}
	if r.Lo != nil {
		where = append(where, m.Quote(key[0])+" > "+ph(len(key)))
	}
	if r.Hi != nil {
		where = append(where, m.Quote(key[0])+" <= "+ph(len(key)+1))
	}
	desc := make([]string, len(key))
	for i, k := range key {
		desc[i] = m.Quote(k) + " DESC"
	}
	q.SQL = "SELECT " + m.selectList(table, cols) + " FROM " + m.Quote(table...) + " WHERE " + strings.Join(where, " AND ") +
		" ORDER BY " + strings.Join(desc, ", ") + " LIMIT " + strconv.Itoa(limit)
	return q
}

// Upsert implements Dialect. MySQL applies ON DUPLICATE KEY UPDATE
// assignments left to right, each seeing the ones before: every column is
// guarded by the stored fence, and the fence itself is assigned last.
func (m MySQL) Upsert(table []string, cols, key []string, fence string, rows int) Upsert {
	var b strings.Builder
	b.WriteString("INSERT INTO " + m.Quote(table...) + " (" + m.quoteList(cols) + ", " + m.Quote(fence) + ") VALUES ")
	row := "(" + strings.Repeat("?, ", len(cols)) + "?)"
	for r := 0; r < rows; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	in := func(c string) string { return "VALUES(" + m.Quote(c) + ")" }
	if m.RowAlias {
		b.WriteString(" AS `new`")
		in = func(c string) string { return "`new`." + m.Quote(c) }
	}
	f := m.Quote(fence)
	guard := f + " <= " + in(fence)
	isKey := map[string]bool{}
	for _, k := range key {
		isKey[k] = true
	}
	var set []string
	for _, c := range cols {
		if !isKey[c] {
			set = append(set, m.Quote(c)+" = IF("+guard+", "+in(c)+", "+m.Quote(c)+")")
		}
	}
	set = append(set, f+" = IF("+guard+", "+in(fence)+", "+f+")")
	b.WriteString(" ON DUPLICATE KEY UPDATE " + strings.Join(set, ", "))
	return Upsert{SQL: b.String(), TokenPerRow: true, Probe: m.probe(table, key, fence, rows)}
}

// probe counts, among the batch's keys, the rows that exist and those whose
// stored token is newer than ? (the first parameter).
func (m MySQL) probe(table []string, key []string, fence string, rows int) string {
	return "SELECT COUNT(*), COALESCE(SUM(" + m.Quote(fence) + " > ?), 0) FROM " + m.Quote(table...) +
		" WHERE " + m.keysIn(key, rows)
}

// keysIn is "k IN (?, …)" or "(k1, k2) IN ((?, ?), …)" for n keys.
func (m MySQL) keysIn(key []string, n int) string {
	tuple := "?"
	cols := m.Quote(key[0])
	if len(key) > 1 {
		tuple = "(" + strings.TrimSuffix(strings.Repeat("?, ", len(key)), ", ") + ")"
		cols = "(" + m.quoteList(key) + ")"
	}
	return cols + " IN (" + strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", ") + ")"
}

// SelectByKeys implements Dialect.
func (m MySQL) SelectByKeys(table []string, cols, key []string, n int) string {
	return "SELECT " + m.selectList(table, cols) + " FROM " + m.Quote(table...) + " WHERE " + m.keysIn(key, n)
}

// DeleteByKeys implements Dialect.
func (m MySQL) DeleteByKeys(table []string, key []string, n int) string {
	return "DELETE FROM " + m.Quote(table...) + " WHERE " + m.keysIn(key, n)
}

// MaxParams implements Dialect.
func (MySQL) MaxParams() int { return 65535 }

// BoundTx implements Dialect. MySQL has no transaction-local timeouts, so
// the session's are set for the transaction: wait_timeout closes the
// connection of a holder that goes silent between statements (rolling its
// transaction back), net_read_timeout and net_write_timeout end a statement
// whose client stops sending or reading in its middle (a holder frozen
// inside LOAD DATA LOCAL INFILE keeps its locks for as long as the server
// waits for the file's next bytes), innodb_lock_wait_timeout bounds a lock
// wait; all in whole seconds, rounded down. The session's own values are
// kept in user variables first (once: a second BoundTx before UnboundTx
// keeps the first saved values) for UnboundTx to restore.
func (MySQL) BoundTx(remaining time.Duration) (string, []any) {
	s := max(int64(remaining/time.Second), 1)
	var b strings.Builder
	b.WriteString("SET ")
	for _, v := range boundVars {
		fmt.Fprintf(&b, "@migrate_%s = COALESCE(@migrate_%s, @@SESSION.%s), ", v, v, v)
	}
	args := make([]any, len(boundVars))
	for i, v := range boundVars {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "SESSION %s = ?", v)
		args[i] = s
	}
	return b.String(), args
}

// boundVars are the session variables BoundTx sets and UnboundTx restores.
var boundVars = []string{"wait_timeout", "innodb_lock_wait_timeout", "net_read_timeout", "net_write_timeout"}

// UnboundTx implements Dialect: the session's values from before BoundTx,
// so that a pooled connection does not carry a finished transaction's
// bounds into later statements.
func (MySQL) UnboundTx() string {
	set := make([]string, 0, 2*len(boundVars))
	for _, v := range boundVars {
		set = append(set, fmt.Sprintf("SESSION %s = @migrate_%s", v, v))
	}
	for _, v := range boundVars {
		set = append(set, fmt.Sprintf("@migrate_%s = NULL", v))
	}
	return "SET " + strings.Join(set, ", ")
}

// collation is the binary NO PAD collation: keys equal in PostgreSQL are
// equal here, no more (case, accents and trailing spaces all count).
func (m MySQL) collation() string {
	if m.MariaDB || !versionAtLeast(m.Version, 8, 0, 0) {
		return "utf8mb4_nopad_bin"
	}
	return "utf8mb4_0900_bin"
}

// CreateTable implements Dialect.
func (m MySQL) CreateTable(table []string, cols []Column, key []string, fence string) string {
	defs := make([]string, 0, len(cols)+2)
	for _, c := range cols {
		d := m.Quote(c.Name) + " " + c.Type
		if c.NotNull {
			d += " NOT NULL"
		}
		defs = append(defs, d)
	}
	defs = append(defs, m.Quote(fence)+" bigint NOT NULL DEFAULT 0", "PRIMARY KEY ("+m.quoteList(key)+")")
	return "CREATE TABLE " + m.Quote(table...) + " (\n  " + strings.Join(defs, ",\n  ") +
		"\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=" + m.collation()
}

// AddFenceColumn implements Dialect.
func (m MySQL) AddFenceColumn(table []string, fence string) string {
	return "ALTER TABLE " + m.Quote(table...) + " ADD COLUMN " + m.Quote(fence) + " bigint NOT NULL DEFAULT 0"
}

// Helpers implements Dialect. The fence row has a check counter: an UPDATE
// that changes nothing reports no affected row in MySQL.
func (m MySQL) Helpers() []string {
	tail := " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=" + m.collation()
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(FenceTable) + ` (
  plan varchar(191) NOT NULL, tbl varchar(191) NOT NULL, shard int NOT NULL,
  token bigint NOT NULL, owner varchar(255) NOT NULL,
  claimed_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), checks bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (plan, tbl, shard))` + tail,
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(CheckpointTable) + ` (
  plan varchar(191) NOT NULL, tbl varchar(191) NOT NULL, shard int NOT NULL,
  lo_key text, hi_key text, last_key text,
  rows_done bigint NOT NULL DEFAULT 0, token bigint NOT NULL DEFAULT 0,
  state varchar(16) NOT NULL DEFAULT 'pending', updated_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (plan, tbl, shard))` + tail,
	}
}

// SetupLock implements Dialect.
func (MySQL) SetupLock(name string) (string, []any) {
	return "SELECT GET_LOCK(?, 1)", []any{lockName(name)}
}

// SetupUnlock implements Dialect.
func (MySQL) SetupUnlock(name string) (string, []any) {
	return "SELECT RELEASE_LOCK(?)", []any{lockName(name)}
}

// lockName fits MySQL's 64-character lock names.
func lockName(name string) string {
	if len(name) > 64 {
		return name[:64]
	}
	return name
}

// FenceClaim implements Dialect: the fence is assigned last, after the
// columns whose guards read it.
func (m MySQL) FenceClaim() string {
	guard := "token < VALUES(token)"
	return `INSERT INTO ` + m.Quote(FenceTable) + ` (plan, tbl, shard, token, owner) VALUES (?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE owner = IF(` + guard + `, VALUES(owner), owner),
  claimed_at = IF(` + guard + `, CURRENT_TIMESTAMP(6), claimed_at),
  token = IF(` + guard + `, VALUES(token), token)`
}

// FenceFloor implements Dialect.
func (m MySQL) FenceFloor() string {
	return `INSERT INTO ` + m.Quote(FenceTable) + ` (plan, tbl, shard, token, owner) VALUES (?, ?, ?, ?, '')
ON DUPLICATE KEY UPDATE plan = plan`
}

// MaxToken implements Dialect.
func (m MySQL) MaxToken(table []string, fence string) string {
	return "SELECT COALESCE(MAX(" + m.Quote(fence) + "), 0) FROM " + m.Quote(table...)
}

// FenceCheck implements Dialect: a locking UPDATE (never a snapshot read)
// that always changes the row, so a match reports one affected row.
func (m MySQL) FenceCheck() string {
	return `UPDATE ` + m.Quote(FenceTable) + ` SET checks = checks + 1
WHERE plan = ? AND tbl = ? AND shard = ? AND token = ? AND owner = ?`
}

// FenceRead implements Dialect.
func (m MySQL) FenceRead() string {
	return `SELECT token, owner FROM ` + m.Quote(FenceTable) + ` WHERE plan = ? AND tbl = ? AND shard = ?`
}

// CheckpointInit implements Dialect.
func (m MySQL) CheckpointInit() string {
	return `INSERT INTO ` + m.Quote(CheckpointTable) + ` (plan, tbl, shard, lo_key, hi_key) VALUES (?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE plan = plan`
}

// CheckpointRead implements Dialect.
func (m MySQL) CheckpointRead(lock bool) string {
	q := `SELECT lo_key, hi_key, last_key, rows_done, token, state, updated_at FROM ` + m.Quote(CheckpointTable) + `
WHERE plan = ? AND tbl = ? AND shard = ?`
	if lock {
		q += " FOR UPDATE"
	}
	return q
}

// CheckpointAdvance implements Dialect.
func (m MySQL) CheckpointAdvance() string {
	return `UPDATE ` + m.Quote(CheckpointTable) + ` SET last_key = ?, rows_done = ?, token = ?,
  state = 'running', updated_at = CURRENT_TIMESTAMP(6)
WHERE plan = ? AND tbl = ? AND shard = ? AND rows_done IN (?, ?)`
}

// CheckpointState implements Dialect.
func (m MySQL) CheckpointState() string {
	return `UPDATE ` + m.Quote(CheckpointTable) + ` SET state = ?, token = ?, updated_at = CURRENT_TIMESTAMP(6)
WHERE plan = ? AND tbl = ? AND shard = ?`
}

// CheckpointResume implements Dialect.
func (m MySQL) CheckpointResume(byTable, byShard bool) string {
	q := `UPDATE ` + m.Quote(CheckpointTable) + ` SET state = 'pending', updated_at = CURRENT_TIMESTAMP(6) WHERE plan = ? AND state = 'halted'`
	if byTable {
		q += " AND tbl = ?"
	}
	if byShard {
		q += " AND shard = ?"
	}
	return q
}

// CheckpointList implements Dialect.
func (m MySQL) CheckpointList() string {
	return `SELECT tbl, shard, state, rows_done, last_key, token, updated_at FROM ` + m.Quote(CheckpointTable) + `
WHERE plan = ? ORDER BY tbl, shard`
}

// ScanOrdered implements Dialect: text key columns in byte order, FLOAT
// columns as doubles (asDouble).
func (m MySQL) ScanOrdered(table []string, cols []Column, key []string, textKey []bool, lo, hi bool) Query {
	order := make([]string, len(key))
	for i, k := range key {
		order[i] = m.Quote(k)
		if textKey[i] {
			// By the bytes of the UTF-8 text, whatever the column's
			// character set (latin1 bytes would order differently).
			if col := colNamed(cols, k); binaryBases[col.Base] {
				order[i] = "CAST(" + order[i] + " AS BINARY)"
			} else {
				order[i] = "CAST(CONVERT(" + order[i] + " USING utf8mb4) AS BINARY)"
			}
		}
	}
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = m.Quote(c.Name)
		if c.Base == "float" {
			sel[i] = asDouble(sel[i])
		}
	}
	var q Query
	q.SQL = "SELECT " + strings.Join(sel, ", ") + " FROM " + m.Quote(table...) + m.keyRange(&q, key, lo, hi) +
		" ORDER BY " + strings.Join(order, ", ")
	return q
}

// keyRange is the WHERE clause for lo < key <= hi, the bounds asked, adding
// their parameters to q: lo's parts are the logical values 0..n-1, hi's
// n..2n-1.
func (m MySQL) keyRange(q *Query, key []string, lo, hi bool) string {
	ph := func(arg int) string { q.Args = append(q.Args, arg); return "?" }
	var where []string
	if lo {
		where = append(where, m.keyset(key, 0, false, ph))
	}
	if hi {
		where = append(where, m.keyset(key, len(key), true, ph))
	}
	if len(where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(where, " AND ")
}

// ChunkEnd implements Dialect.
func (m MySQL) ChunkEnd(table []string, key []string, lo bool, n int) Query {
	var q Query
	q.SQL = "SELECT " + m.quoteList(key) + " FROM " + m.Quote(table...) + m.keyRange(&q, key, lo, false) +
		" ORDER BY " + m.quoteList(key) + " LIMIT 1 OFFSET " + strconv.Itoa(n-1)
	return q
}

// mysqlAsText are the types whose text form tells every value apart, in
// every character set: numbers, dates and times.
var mysqlAsText = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "bigint": true,
	"decimal": true, "double": true, "real": true, "date": true, "datetime": true, "time": true, "year": true}

// Checksum implements Dialect: md5 of the rows, joined by
// ',', each row's values joined by '#', NULL as 'N'; strings, bytes, JSON,
// enums and bits by the hex of their bytes (no character set or collation
// in the way, and never '#', ',' or 'N'); TIMESTAMP as UNIX_TIMESTAMP,
// which the session time zone does not change; doubles as their shortest
// exact text, FLOAT widened to one first. GROUP_CONCAT cuts its result at
// group_concat_max_len or max_allowed_packet; the text being ASCII, a cut
// one is as long as the limit, and yields NULL. The
// rows come in the order of the key range's index scan, without a sort (an
// ORDER BY inside GROUP_CONCAT doubles the cost); were it ever another
// order, the hashes would differ and the rows be compared: slower, never
// wrong.
func (m MySQL) Checksum(table []string, cols []Column, key []string, lo, hi bool) Query {
	vals := make([]string, len(cols))
	for i, c := range cols {
		v := m.Quote(c.Name)
		switch {
		case c.Base == "float":
			v = "(" + asDouble(v) + ")"
		case c.Base == "timestamp":
			v = "UNIX_TIMESTAMP(" + v + ")"
		case !mysqlAsText[c.Base]:
			v = "HEX(" + v + ")"
		}
		vals[i] = "IFNULL(" + v + ", 'N')"
	}
	row := "CONCAT_WS('#', " + strings.Join(vals, ", ") + ")" // ASCII only
	var q Query
	q.SQL = "SELECT n, CASE WHEN n = 0 THEN '' WHEN LENGTH(g) < LEAST(@@group_concat_max_len, @@max_allowed_packet) THEN MD5(g) END FROM (" +
		"SELECT COUNT(*) AS n, GROUP_CONCAT(" + row + " SEPARATOR ',') AS g FROM " + m.Quote(table...) + m.keyRange(&q, key, lo, hi) + ") a"
	return q
}

// OrderedByValue implements Dialect: numbers but floats (NaN has no
// order here), dates and times, and binary strings; text depends on
// collations.
func (MySQL) OrderedByValue(c Column) bool {
	switch c.Base {
	case "float", "double", "real":
		return false
	}
	return mysqlAsText[c.Base] || c.Base == "timestamp" || c.Base == "binary" || c.Base == "varbinary"
}

func colNamed(cols []Column, name string) Column {
	for _, c := range cols {
		if c.Name == name {
			return c
		}
	}
	return Column{}
}

// DrillCount implements Dialect.
func (m MySQL) DrillCount(table, key []string, fence string, after bool, r Range) Query {
	var q Query
	ph := func(arg int) string { q.Args = append(q.Args, arg); return "?" }
	sel := "SELECT COUNT(*), COALESCE(SUM(" + m.Quote(fence) + " < " + ph(len(key)+2) + "), 0) FROM " + m.Quote(table...)
	q.SQL = sel + drillWhere(m, key, after, r, ph)
	return q
}

// DrillDropTable implements Dialect.
func (m MySQL) DrillDropTable(table []string) string {
	return "DROP TABLE IF EXISTS " + m.Quote(table...)
}

// DrillForget implements Dialect.
func (m MySQL) DrillForget() []string {
	return []string{
		"DELETE FROM " + m.Quote(CheckpointTable) + " WHERE plan = ?",
		"DELETE FROM " + m.Quote(FenceTable) + " WHERE plan = ?",
	}
}
