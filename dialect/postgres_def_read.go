package dialect

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/plans"
)

// ReadTable implements Definitions: the table's catalog rows, in a few
// queries by its oid.
func (p Postgres) ReadTable(ctx context.Context, db Querier, table []string) (*TableDef, error) {
	var oid int64
	def := &TableDef{Engine: plans.Postgres, Name: make([]string, 2)}
	err := db.QueryRowContext(ctx, `SELECT c.oid::bigint, n.nspname, c.relname,
  COALESCE(obj_description(c.oid, 'pg_class'), ''), COALESCE(pg_get_partkeydef(c.oid), '')
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass($1) AND c.relkind IN ('r', 'p')`, p.regclass(table)).
		Scan(&oid, &def.Name[0], &def.Name[1], &def.Comment, &def.PartitionBy)
	if err == sql.ErrNoRows {
		return nil, fmt.Errorf("%w: %s", ErrNoTable, p.Quote(table...))
	}
	if err != nil {
		return nil, err
	}
	typeOIDs, err := p.readColumns(ctx, db, oid, def)
	if err != nil {
		return nil, err
	}
	for _, read := range []func(context.Context, Querier, int64, *TableDef) error{
		p.readIndexes, p.readForeignKeys, p.readChecks, p.readPartitions,
	} {
		if err := read(ctx, db, oid, def); err != nil {
			return nil, err
		}
	}
	if def.Types, err = p.readTypes(ctx, db, typeOIDs); err != nil {
		return nil, err
	}
	return def, nil
}

// readColumns reads def's columns, and returns the oids of their types
// that are user-defined (or arrays of such).
func (p Postgres) readColumns(ctx context.Context, db Querier, oid int64, def *TableDef) ([]int64, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+pgColumnSelect+`,
  CASE WHEN t.typtype = 'e' THEN (SELECT json_agg(e.enumlabel ORDER BY e.enumsortorder) FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid)::text END,
  COALESCE((SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum), ''),
  a.attidentity::text, a.attgenerated::text, COALESCE(col_description(a.attrelid, a.attnum), ''),
  EXISTS (SELECT 1 FROM pg_catalog.pg_depend dep JOIN pg_catalog.pg_class s ON s.oid = dep.objid AND s.relkind = 'S'
    WHERE dep.classid = 'pg_catalog.pg_class'::regclass AND dep.refclassid = 'pg_catalog.pg_class'::regclass
      AND dep.refobjid = a.attrelid AND dep.refobjsubid = a.attnum AND dep.deptype = 'a'),
  CASE WHEN t.typnamespace <> 'pg_catalog'::regnamespace OR t.typtype <> 'b' OR t.typelem <> 0 THEN t.oid::bigint ELSE 0 END,
  `+pgDefaultSequences+`::text`+pgColumnFrom+`
WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var types []int64
	for rows.Next() {
		var c ColumnDef
		var labels sql.NullString
		var dflt, ident, gen string
		var owned bool
		var typ int64
		var seqs sql.NullString
		if err := rows.Scan(&c.Name, &c.Type, &c.Base, &c.NotNull, &labels, &dflt, &ident, &gen, &c.Comment, &owned, &typ, &seqs); err != nil {
			return nil, err
		}
		if labels.Valid {
			if err := json.Unmarshal([]byte(labels.String), &c.Values); err != nil {
				return nil, err
			}
		}
		switch {
		case ident == "a":
			c.Identity = IdentityAlways
		case ident == "d":
			c.Identity = IdentityByDefault
		case gen == "s":
			c.Generated, c.Stored = dflt, true
		case owned && strings.HasPrefix(dflt, "nextval("):
			c.Identity = IdentitySerial
		default:
			c.Default = pgClassifyDefault(dflt)
		}
		if seqs.Valid {
			if err := p.defaultSequences(seqs.String, dflt, &c, def); err != nil {
				return nil, err
			}
		}
		if typ != 0 && !slices.Contains(types, typ) {
			types = append(types, typ)
		}
		def.Columns = append(def.Columns, c)
	}
	return types, rows.Err()
}

// pgDefaultSequences is a query's column of a json array of the
// sequences a column's default uses that the column does not own, as
// pgSequenceRow reads them.
const pgDefaultSequences = `(SELECT json_agg(json_build_object('schema', sn.nspname, 'name', s.relname, 'ref', s.oid::regclass::text,
    'type', format_type(q.seqtypid, NULL), 'start', q.seqstart, 'increment', q.seqincrement, 'min', q.seqmin, 'max', q.seqmax,
    'cache', q.seqcache, 'cycle', q.seqcycle) ORDER BY sn.nspname, s.relname)
  FROM pg_catalog.pg_attrdef ad
  JOIN pg_catalog.pg_depend dd ON dd.classid = 'pg_catalog.pg_attrdef'::regclass AND dd.objid = ad.oid AND dd.refclassid = 'pg_catalog.pg_class'::regclass
  JOIN pg_catalog.pg_class s ON s.oid = dd.refobjid AND s.relkind = 'S'
  JOIN pg_catalog.pg_namespace sn ON sn.oid = s.relnamespace
  JOIN pg_catalog.pg_sequence q ON q.seqrelid = s.oid
  WHERE ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend o WHERE o.classid = 'pg_catalog.pg_class'::regclass AND o.objid = s.oid
      AND o.refclassid = 'pg_catalog.pg_class'::regclass AND o.refobjid = a.attrelid AND o.refobjsubid = a.attnum AND o.deptype = 'a'))`

// defaultSequences adds the sequences of a column's default (the json of
// pgDefaultSequences) to def.Sequences, once each; when the default is
// nextval() of one of them and the column an integer, it is c.Sequence.
func (p Postgres) defaultSequences(js, dflt string, c *ColumnDef, def *TableDef) error {
	var rows []pgSequenceRow
	if err := json.Unmarshal([]byte(js), &rows); err != nil {
		return err
	}
	for _, r := range rows {
		seq := Sequence{Name: []string{r.Schema, r.Name}, Ref: r.Ref, Type: r.Type,
			Start: r.Start, Increment: r.Increment, Min: r.Min, Max: r.Max, Cache: r.Cache, Cycle: r.Cycle}
		if !slices.ContainsFunc(def.Sequences, func(s Sequence) bool { return slices.Equal(s.Name, seq.Name) }) {
			def.Sequences = append(def.Sequences, seq)
			slices.SortFunc(def.Sequences, func(a, b Sequence) int { return slices.Compare(a.Name, b.Name) })
		}
		if dflt == "nextval("+pgRegclassConst(seq.Ref)+")" && pgIntegers[c.Base] {
			c.Sequence = seq.Name
		}
	}
	return nil
}

// pgSequenceRow is a sequence of pgDefaultSequences (its integers are
// decoded exactly, not through float64).
type pgSequenceRow struct {
	Schema, Name, Ref, Type           string
	Start, Increment, Min, Max, Cache int64
	Cycle                             bool
}

// pgRegclassConst is a regclass constant as pg_get_expr prints it (with
// standard_conforming_strings): 'name'::regclass.
func pgRegclassConst(name string) string {
	return "'" + strings.ReplaceAll(name, "'", "''") + "'::regclass"
}

// pgIntegers are the integer types a sequence's values fit.
var pgIntegers = map[string]bool{"smallint": true, "integer": true, "bigint": true}

var (
	pgNumber     = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
	pgCastSuffix = regexp.MustCompile(`^(::[A-Za-z_][A-Za-z0-9_ ."]*(\[\])?)+$`)
	pgNowDefault = regexp.MustCompile(`(?i)^(now\(\)|CURRENT_TIMESTAMP(\([0-9]\))?|transaction_timestamp\(\)|LOCALTIMESTAMP(\([0-9]\))?)$`)
)

// pgClassifyDefault classifies a default as pg_get_expr prints it.
func pgClassifyDefault(expr string) Default {
	switch {
	case expr == "" || strings.HasPrefix(strings.ToUpper(expr), "NULL::") || strings.EqualFold(expr, "NULL"):
		return Default{}
	case pgNumber.MatchString(expr), expr == "true", expr == "false":
		return Default{Kind: DefaultLiteral, Value: expr, Expr: expr}
	case pgNowDefault.MatchString(expr):
		return Default{Kind: DefaultNow, Expr: expr}
	}
	if v, rest, ok := pgStringLiteral(expr); ok && (rest == "" || pgCastSuffix.MatchString(rest)) {
		return Default{Kind: DefaultLiteral, Value: v, Expr: expr}
	}
	return Default{Kind: DefaultExpr, Expr: expr}
}

// pgStringLiteral reads a string constant at the start of s ('…' or
// E'…'), returning its value and what follows it.
func pgStringLiteral(s string) (val, rest string, ok bool) {
	esc := false
	if strings.HasPrefix(s, "E'") || strings.HasPrefix(s, "e'") {
		esc, s = true, s[1:]
	}
	if !strings.HasPrefix(s, "'") {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '\'' && i+1 < len(s) && s[i+1] == '\'':
			b.WriteByte('\'')
			i++
		case ch == '\'':
			return b.String(), s[i+1:], true
		case esc && ch == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '\\', '\'':
				b.WriteByte(s[i])
			default:
				return "", "", false // octal, unicode: left as an expression
			}
		default:
			b.WriteByte(ch)
		}
	}
	return "", "", false
}

// pgAction is a foreign key action's name from its pg_constraint code.
var pgAction = map[string]string{"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}

// readIndexes reads the primary key and the other indexes, those backing
// exclusion constraints aside (NotMigrated lists them).
func (p Postgres) readIndexes(ctx context.Context, db Querier, oid int64, def *TableDef) (err error) {
	def.PrimaryKey, def.Indexes, err = p.indexes(ctx, db, oid, false)
	return err
}

// indexes reads a table's primary key and other indexes; own: only those
// declared on it, not a partition's from its parent's (attached to one).
func (p Postgres) indexes(ctx context.Context, db Querier, oid int64, own bool) (pk *Index, out []Index, err error) {
	cond := ""
	if own {
		cond = `
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits ih WHERE ih.inhrelid = i.indexrelid)`
	}
	rows, err := db.QueryContext(ctx, `SELECT ci.relname, i.indisunique, i.indisprimary, am.amname,
  COALESCE(pg_get_expr(i.indpred, i.indrelid, true), ''), pg_get_indexdef(i.indexrelid),
  EXISTS (SELECT 1 FROM pg_catalog.pg_constraint con WHERE con.conindid = i.indexrelid AND con.conrelid = i.indrelid AND con.contype IN ('u', 'p')),
  (SELECT json_agg(json_build_array(COALESCE(a.attname, ''), pg_get_indexdef(i.indexrelid, k.n::int, true), (i.indoption[k.n - 1] & 1) = 1) ORDER BY k.n)
   FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
   LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum AND k.attnum <> 0
   WHERE k.n <= i.indnkeyatts)::text
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class ci ON ci.oid = i.indexrelid
JOIN pg_catalog.pg_am am ON am.oid = ci.relam
WHERE i.indrelid = $1::oid
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint x WHERE x.conindid = i.indexrelid AND x.conrelid = i.indrelid AND x.contype = 'x')`+cond+`
ORDER BY ci.relname`, oid)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var x Index
		var primary bool
		var parts string
		if err := rows.Scan(&x.Name, &x.Unique, &primary, &x.Method, &x.Where, &x.Def, &x.Constraint, &parts); err != nil {
			return nil, nil, err
		}
		var raw [][3]any
		if err := json.Unmarshal([]byte(parts), &raw); err != nil {
			return nil, nil, err
		}
		for _, r := range raw {
			col, _ := r[0].(string)
			part := IndexPart{Column: col}
			if col == "" {
				part.Expr, _ = r[1].(string)
			}
			part.Desc, _ = r[2].(bool)
			x.Parts = append(x.Parts, part)
		}
		if primary {
			pk = &x
		} else {
			out = append(out, x)
		}
	}
	return pk, out, rows.Err()
}

// pgNames is a query's column of a json array of attribute names, of
// table tbl's attnums in array arr, in order.
func pgNames(arr, tbl string) string {
	return `(SELECT json_agg(a.attname ORDER BY k.n) FROM unnest(` + arr + `) WITH ORDINALITY AS k(attnum, n)
   JOIN pg_catalog.pg_attribute a ON a.attrelid = ` + tbl + ` AND a.attnum = k.attnum)::text`
}

func (p Postgres) readForeignKeys(ctx context.Context, db Querier, oid int64, def *TableDef) (err error) {
	def.ForeignKeys, err = p.foreignKeys(ctx, db, oid)
	return err
}

// foreignKeys reads the foreign keys declared on a table (not a
// partition's from its parent's).
func (p Postgres) foreignKeys(ctx context.Context, db Querier, oid int64) ([]ForeignKey, error) {
	rows, err := db.QueryContext(ctx, `SELECT con.conname, `+pgNames("con.conkey", "con.conrelid")+`, rn.nspname, rc.relname,
  `+pgNames("con.confkey", "con.confrelid")+`, con.confdeltype::text, con.confupdtype::text, pg_get_constraintdef(con.oid)
FROM pg_catalog.pg_constraint con
JOIN pg_catalog.pg_class rc ON rc.oid = con.confrelid
JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace
WHERE con.conrelid = $1::oid AND con.contype = 'f' AND con.conparentid = 0
ORDER BY con.conname`, oid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ForeignKey
	for rows.Next() {
		var fk ForeignKey
		var cols, refCols, del, upd string
		fk.RefTable = make([]string, 2)
		if err := rows.Scan(&fk.Name, &cols, &fk.RefTable[0], &fk.RefTable[1], &refCols, &del, &upd, &fk.Def); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(cols), &fk.Columns); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(refCols), &fk.RefColumns); err != nil {
			return nil, err
		}
		fk.OnDelete, fk.OnUpdate = pgAction[del], pgAction[upd]
		out = append(out, fk)
	}
	return out, rows.Err()
}

func (p Postgres) readChecks(ctx context.Context, db Querier, oid int64, def *TableDef) error {
	rows, err := db.QueryContext(ctx, `SELECT con.conname, pg_get_constraintdef(con.oid)
FROM pg_catalog.pg_constraint con
WHERE con.conrelid = $1::oid AND con.contype = 'c'
ORDER BY con.conname`, oid)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c Check
		if err := rows.Scan(&c.Name, &c.Expr); err != nil {
			return err
		}
		c.Expr = pgCheckExpr(c.Expr)
		def.Checks = append(def.Checks, c)
	}
	return rows.Err()
}

// pgCheckExpr is a CHECK constraint's expression from its
// pg_get_constraintdef ("CHECK ((qty > 0)) NOT VALID" gives "(qty > 0)").
func pgCheckExpr(s string) string {
	s = strings.TrimSuffix(strings.TrimSuffix(s, " NOT VALID"), " NO INHERIT")
	if strings.HasPrefix(s, "CHECK (") && strings.HasSuffix(s, ")") {
		return s[len("CHECK (") : len(s)-1]
	}
	return s
}

// readPartitions reads the partitions, each with the indexes and foreign
// keys declared on it alone.
func (p Postgres) readPartitions(ctx context.Context, db Querier, oid int64, def *TableDef) error {
	rows, err := db.QueryContext(ctx, `SELECT c.oid::bigint, n.nspname, c.relname, pg_get_expr(c.relpartbound, c.oid)
FROM pg_catalog.pg_inherits i
JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE i.inhparent = $1::oid AND c.relispartition
ORDER BY c.relname`, oid)
	if err != nil {
		return err
	}
	var oids []int64
	for rows.Next() {
		var oid int64
		pt := Partition{Name: make([]string, 2)}
		if err := rows.Scan(&oid, &pt.Name[0], &pt.Name[1], &pt.Bound); err != nil {
			rows.Close()
			return err
		}
		oids, def.Partitions = append(oids, oid), append(def.Partitions, pt)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return err
	}
	for i, oid := range oids {
		pt := &def.Partitions[i]
		if pt.PrimaryKey, pt.Indexes, err = p.indexes(ctx, db, oid, true); err != nil {
			return err
		}
		if pt.ForeignKeys, err = p.foreignKeys(ctx, db, oid); err != nil {
			return err
		}
	}
	return nil
}
