package dialect

import (
	"cmp"
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// ListTables implements Definitions: the base tables of DATABASE() (a
// MariaDB system-versioned table is one too), without migrate's helpers.
func (m MySQL) ListTables(ctx context.Context, db Querier) ([][]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_type IN ('BASE TABLE', 'SYSTEM VERSIONED')
  AND table_name NOT LIKE '\_migrate\_%'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, []string{name})
	}
	slices.SortFunc(out, func(a, b []string) int { return cmp.Compare(a[0], b[0]) })
	return out, rows.Err()
}

// ReadTable implements Definitions.
func (m MySQL) ReadTable(ctx context.Context, db Querier, table []string) (*TableDef, error) {
	cond, args := m.where(table)
	var inDB bool
	var schema, name, options string
	var next int64
	def := &TableDef{Engine: plans.MySQL}
	cond = strings.ReplaceAll(cond, "table_", "t.table_")
	err := db.QueryRowContext(ctx, `SELECT t.table_schema = DATABASE(), t.table_schema, t.table_name, COALESCE(t.table_comment, ''), COALESCE(t.create_options, ''),
  COALESCE(t.engine, ''), COALESCE(t.table_collation, ''), COALESCE(l.character_set_name, ''), LEAST(COALESCE(t.auto_increment, 0), 9223372036854775807)
FROM information_schema.tables t LEFT JOIN information_schema.collations l ON l.collation_name = t.table_collation
WHERE `+cond+` AND t.table_type IN ('BASE TABLE', 'SYSTEM VERSIONED')`, args...).
		Scan(&inDB, &schema, &name, &def.Comment, &options, &def.StorageEngine, &def.Collation, &def.Charset, &next)
	if err == sql.ErrNoRows {
		return nil, ErrNoTable
	}
	if err != nil {
		return nil, err
	}
	def.Name = []string{name}
	if !inDB {
		def.Name = []string{schema, name}
	}
	if def.Columns, err = m.readColumns(ctx, db, def.Name); err != nil {
		return nil, err
	}
	for i := range def.Columns {
		if def.Columns[i].Identity == AutoIncrement {
			def.Columns[i].Next = next // MySQL 8 caches it (information_schema_stats_expiry): a floor; an unsigned bigint counter past int64 reads as its max, which no PostgreSQL identity holds anyway
		}
	}
	if err := m.readIndexes(ctx, db, def); err != nil {
		return nil, err
	}
	if def.ForeignKeys, err = m.readForeignKeys(ctx, db, def.Name); err != nil {
		return nil, err
	}
	if def.Checks, err = m.readChecks(ctx, db, def); err != nil {
		return nil, err
	}
	if strings.Contains(strings.ToLower(options), "partitioned") {
		if def.PartitionBy, err = m.readPartitionBy(ctx, db, def.Name); err != nil {
			return nil, err
		}
	}
	return def, nil
}

// readColumns reads the columns by Columns' query, with what a CREATE
// TABLE says of each besides its type.
func (m MySQL) readColumns(ctx context.Context, db Querier, table []string) ([]ColumnDef, error) {
	q, args := m.columnsQuery(table, ", c.column_default, COALESCE(c.extra, ''), COALESCE(c.generation_expression, ''), COALESCE(c.column_comment, ''), "+
		"COALESCE(c.character_set_name, ''), COALESCE(c.collation_name, '')")
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ColumnDef
	for rows.Next() {
		var c ColumnDef
		var def sql.NullString
		var extra, gen string
		if err := rows.Scan(&c.Name, &c.Type, &c.Base, &c.NotNull, &def, &extra, &gen, &c.Comment, &c.Charset, &c.Collation); err != nil {
			return nil, err
		}
		if c.Base == "enum" || c.Base == "set" {
			c.Values = mysqlMembers(c.Type)
		}
		lower := strings.ToLower(extra)
		if strings.Contains(lower, "auto_increment") {
			c.Identity = AutoIncrement
		}
		if i := strings.Index(lower, "on update "); i >= 0 {
			c.OnUpdate = strings.TrimSpace(extra[i+len("on update "):])
		}
		if strings.Contains(lower, "generated") && gen != "" && !strings.Contains(lower, "default_generated") {
			c.Generated, c.Stored = m.catalogExpr(gen), strings.Contains(lower, "stored")
		} else if c.Identity == "" {
			c.Default = m.classifyDefault(def, lower, c.Base)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

var (
	mysqlNumber = regexp.MustCompile(`^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$`)
	mysqlNow    = regexp.MustCompile(`(?i)^(current_timestamp|now|localtimestamp|localtime)(\(\d*\))?$`)
)

// classifyDefault reads column_default. MariaDB spells it as an
// expression: 'abc' quoted, 2000 bare, NULL for DEFAULT NULL (SQL NULL for
// no default at all), current_timestamp(6), curdate(), (1 + 2). MySQL 8
// gives a literal's raw value and marks an expression DEFAULT_GENERATED
// in extra.
func (m MySQL) classifyDefault(raw sql.NullString, extra, base string) Default {
	if !raw.Valid {
		return Default{}
	}
	v := raw.String
	if mysqlNow.MatchString(v) {
		return Default{Kind: DefaultNow, Expr: v}
	}
	if m.MariaDB {
		switch {
		case v == "NULL":
			return Default{}
		case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
			return Default{Kind: DefaultLiteral, Value: mysqlUnquote(v), Expr: v}
		case mysqlNumber.MatchString(v):
			return Default{Kind: DefaultLiteral, Value: v, Expr: v}
		}
		return Default{Kind: DefaultExpr, Expr: v}
	}
	if strings.Contains(extra, "default_generated") || (base == "bit" && strings.HasPrefix(v, "b'")) {
		return Default{Kind: DefaultExpr, Expr: m.catalogExpr(v)}
	}
	expr := typemap.MySQLString(v)
	if mysqlNumeric(base) && mysqlNumber.MatchString(v) {
		expr = v
	}
	return Default{Kind: DefaultLiteral, Value: v, Expr: expr}
}

// readIndexes reads the primary key and the other indexes from
// information_schema.statistics, in name order.
func (m MySQL) readIndexes(ctx context.Context, db Querier, def *TableDef) error {
	cond, args := m.where(def.Name)
	expr := "NULL"
	if !m.MariaDB && versionAtLeast(m.Version, 8, 0, 13) {
		expr = "expression" // functional key parts
	}
	rows, err := db.QueryContext(ctx, `SELECT index_name, non_unique = 0, COALESCE(column_name, ''), COALESCE(collation = 'D', FALSE), COALESCE(sub_part, 0), LOWER(index_type), COALESCE(`+expr+`, '')
FROM information_schema.statistics WHERE `+cond+`
ORDER BY index_name, seq_in_index`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	byName := map[string]*Index{}
	var order []string
	for rows.Next() {
		var x Index
		var p IndexPart
		if err := rows.Scan(&x.Name, &x.Unique, &p.Column, &p.Desc, &p.Prefix, &x.Method, &p.Expr); err != nil {
			return err
		}
		if byName[x.Name] == nil {
			byName[x.Name] = &x
			order = append(order, x.Name)
		}
		byName[x.Name].Parts = append(byName[x.Name].Parts, p)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	slices.Sort(order)
	for _, n := range order {
		if x := byName[n]; n == "PRIMARY" {
			def.PrimaryKey = x
		} else {
			def.Indexes = append(def.Indexes, *x)
		}
	}
	return nil
}

// readForeignKeys reads the table's foreign keys, columns in order.
func (m MySQL) readForeignKeys(ctx context.Context, db Querier, table []string) ([]ForeignKey, error) {
	cond, args := m.where(table)
	cond = strings.ReplaceAll(cond, "table_", "k.table_")
	rows, err := db.QueryContext(ctx, `SELECT k.constraint_name, k.column_name, k.referenced_table_schema = DATABASE(), k.referenced_table_schema, k.referenced_table_name, k.referenced_column_name, UPPER(r.delete_rule), UPPER(r.update_rule)
FROM information_schema.key_column_usage k
JOIN information_schema.referential_constraints r
  ON r.constraint_schema = k.constraint_schema AND r.constraint_name = k.constraint_name AND r.table_name = k.table_name
WHERE `+cond+` AND k.referenced_table_name IS NOT NULL
ORDER BY k.constraint_name, k.ordinal_position`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ForeignKey
	for rows.Next() {
		var name, col, rschema, rtable, rcol, del, upd string
		var same bool
		if err := rows.Scan(&name, &col, &same, &rschema, &rtable, &rcol, &del, &upd); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].Name != name {
			ref := []string{rtable}
			if !same {
				ref = []string{rschema, rtable}
			}
			out = append(out, ForeignKey{Name: name, RefTable: ref, OnDelete: del, OnUpdate: upd})
		}
		fk := &out[len(out)-1]
		fk.Columns = append(fk.Columns, col)
		fk.RefColumns = append(fk.RefColumns, rcol)
	}
	return out, rows.Err()
}

// readChecks reads the CHECK constraints. MySQL 8 names them per schema
// (check_constraints has no table_name); MariaDB per table, and lists a
// column's own check under the column's name, and the json_valid check
// of each JSON column, which comes with the json type and is left out.
func (m MySQL) readChecks(ctx context.Context, db Querier, def *TableDef) ([]Check, error) {
	cond, args := m.where(def.Name)
	cond = strings.ReplaceAll(cond, "table_", "t.table_")
	on := ""
	if m.MariaDB {
		on = " AND c.table_name = t.table_name"
	}
	rows, err := db.QueryContext(ctx, `SELECT c.constraint_name, c.check_clause
FROM information_schema.table_constraints t
JOIN information_schema.check_constraints c
  ON c.constraint_schema = t.table_schema AND c.constraint_name = t.constraint_name`+on+`
WHERE `+cond+` AND t.constraint_type = 'CHECK'
ORDER BY c.constraint_name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Check
	for rows.Next() {
		var c Check
		if err := rows.Scan(&c.Name, &c.Expr); err != nil {
			return nil, err
		}
		c.Expr = m.catalogExpr(c.Expr)
		if m.MariaDB && slices.ContainsFunc(def.Columns, func(col ColumnDef) bool {
			return col.Base == "json" && col.Name == c.Name && c.Expr == "json_valid("+m.Quote(col.Name)+")"
		}) {
			continue
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// readPartitionBy is the PARTITION BY clause of SHOW CREATE TABLE, with
// its partitions, as the server spells it (MySQL 8 wraps it in a
// versioned comment /*!50100 … */, which is taken off).
func (m MySQL) readPartitionBy(ctx context.Context, db Querier, table []string) (string, error) {
	var name, text string
	if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE "+m.Quote(table...)).Scan(&name, &text); err != nil {
		return "", err
	}
	i := strings.Index(text, "PARTITION BY")
	if i < 0 {
		return "", nil
	}
	clause := text[i:]
	if j := strings.LastIndex(text[:i], "/*!"); j >= 0 && !strings.Contains(text[j:i], "*/") {
		clause = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(clause), "*/"))
	}
	return strings.TrimSpace(clause), nil
}

// catalogExpr is an expression of MySQL 8's information_schema (a
// default's, a generated column's, a check's) as SQL: MySQL 8 shows the
// quotes of its string literals backslash-escaped (_utf8mb4\'a\'), which
// is no SQL outside a literal. MariaDB's are SQL as they are.
func (m MySQL) catalogExpr(e string) string {
	if m.MariaDB || !strings.Contains(e, `\'`) {
		return e
	}
	var b strings.Builder
	for i := 0; i < len(e); i++ {
		if e[i] == '\\' && i+1 < len(e) && (e[i+1] == '\'' || e[i+1] == '\\') {
			i++
		}
		b.WriteByte(e[i])
	}
	return b.String()
}
