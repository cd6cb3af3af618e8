package dialect

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
)

// pgTypeInfo is what readTypes reads of one type.
type pgTypeInfo struct {
	schema, name, kind string
	system             bool
	elem, base, sub    int64
	deps               []int64 // a composite type's attribute types
}

// readTypes reads the user-defined types of oids and those they use,
// each after the types it uses. An array stands for its element type.
func (p Postgres) readTypes(ctx context.Context, db Querier, oids []int64) ([]UserType, error) {
	var out []UserType
	seen := map[int64]bool{}
	var visit func(oid int64) error
	visit = func(oid int64) error {
		if oid == 0 || seen[oid] {
			return nil
		}
		seen[oid] = true
		t, err := p.typeInfo(ctx, db, oid)
		if err != nil {
			return err
		}
		if t.elem != 0 {
			return visit(t.elem)
		}
		if t.system {
			return nil
		}
		for _, d := range append([]int64{t.base, t.sub}, t.deps...) {
			if err := visit(d); err != nil {
				return err
			}
		}
		var create string
		switch t.kind {
		case "enum":
			create, err = p.enumCreate(ctx, db, oid, t)
		case "domain":
			create, err = p.domainCreate(ctx, db, oid, t)
		case "composite":
			create, err = p.compositeCreate(ctx, db, oid, t)
		case "range":
			create, err = p.rangeCreate(ctx, db, oid, t)
		default:
			return nil // a base type of an extension: the extension's
		}
		if err != nil {
			return err
		}
		out = append(out, UserType{Name: []string{t.schema, t.name}, Kind: t.kind, Create: create})
		return nil
	}
	for _, oid := range oids {
		if err := visit(oid); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (p Postgres) typeInfo(ctx context.Context, db Querier, oid int64) (pgTypeInfo, error) {
	var t pgTypeInfo
	var deps sql.NullString
	err := db.QueryRowContext(ctx, `SELECT n.nspname, t.typname,
  CASE t.typtype WHEN 'e' THEN 'enum' WHEN 'd' THEN 'domain' WHEN 'r' THEN 'range'
    WHEN 'c' THEN CASE WHEN (SELECT relkind FROM pg_catalog.pg_class WHERE oid = t.typrelid) = 'c' THEN 'composite' ELSE 'row' END
    ELSE 'base' END,
  n.nspname IN ('pg_catalog', 'information_schema') OR n.nspname LIKE 'pg\_%'
    OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_type'::regclass AND d.objid = t.oid AND d.deptype = 'e'),
  CASE WHEN t.typlen = -1 AND t.typelem <> 0 AND t.typsubscript = 'array_subscript_handler'::regproc THEN t.typelem::bigint ELSE 0 END,
  t.typbasetype::bigint,
  COALESCE((SELECT r.rngsubtype::bigint FROM pg_catalog.pg_range r WHERE r.rngtypid = t.oid), 0),
  (SELECT json_agg(a.atttypid::bigint ORDER BY a.attnum) FROM pg_catalog.pg_attribute a
   WHERE a.attrelid = t.typrelid AND t.typrelid <> 0 AND a.attnum > 0 AND NOT a.attisdropped)::text
FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
WHERE t.oid = $1::oid`, oid).Scan(&t.schema, &t.name, &t.kind, &t.system, &t.elem, &t.base, &t.sub, &deps)
	if err != nil {
		return t, err
	}
	if t.kind == "composite" && deps.Valid {
		err = json.Unmarshal([]byte(deps.String), &t.deps)
	}
	return t, err
}

// pgDoOnce is an idempotent DO block running stmt, which fails with
// duplicate_object when what it creates exists.
func pgDoOnce(stmt string) string {
	return pgDo("BEGIN " + stmt + "; EXCEPTION WHEN duplicate_object THEN NULL; END")
}

func (p Postgres) enumCreate(ctx context.Context, db Querier, oid int64, t pgTypeInfo) (string, error) {
	var labels string
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(json_agg(enumlabel ORDER BY enumsortorder), '[]')::text
FROM pg_catalog.pg_enum WHERE enumtypid = $1::oid`, oid).Scan(&labels); err != nil {
		return "", err
	}
	var vals []string
	if err := json.Unmarshal([]byte(labels), &vals); err != nil {
		return "", err
	}
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = quoteLiteral(v)
	}
	return pgDoOnce("CREATE TYPE " + p.Quote(t.schema, t.name) + " AS ENUM (" + strings.Join(q, ", ") + ")"), nil
}

func (p Postgres) domainCreate(ctx context.Context, db Querier, oid int64, t pgTypeInfo) (string, error) {
	var base string
	var dflt sql.NullString
	var notNull bool
	var checks sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT format_type(t.typbasetype, t.typtypmod), t.typdefault, t.typnotnull,
  (SELECT json_agg(json_build_array(c.conname, pg_get_constraintdef(c.oid)) ORDER BY c.conname)
   FROM pg_catalog.pg_constraint c WHERE c.contypid = t.oid AND c.contype = 'c')::text
FROM pg_catalog.pg_type t WHERE t.oid = $1::oid`, oid).Scan(&base, &dflt, &notNull, &checks); err != nil {
		return "", err
	}
	s := "CREATE DOMAIN " + p.Quote(t.schema, t.name) + " AS " + base
	if dflt.Valid {
		s += " DEFAULT " + dflt.String
	}
	if notNull {
		s += " NOT NULL"
	}
	if checks.Valid {
		var cs [][2]string
		if err := json.Unmarshal([]byte(checks.String), &cs); err != nil {
			return "", err
		}
		for _, c := range cs {
			s += " CONSTRAINT " + p.Quote(c[0]) + " " + c[1]
		}
	}
	return pgDoOnce(s), nil
}

func (p Postgres) compositeCreate(ctx context.Context, db Querier, oid int64, t pgTypeInfo) (string, error) {
	var attrs string
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(json_agg(json_build_array(a.attname, format_type(a.atttypid, a.atttypmod)) ORDER BY a.attnum), '[]')::text
FROM pg_catalog.pg_type t JOIN pg_catalog.pg_attribute a ON a.attrelid = t.typrelid
WHERE t.oid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped`, oid).Scan(&attrs); err != nil {
		return "", err
	}
	var as [][2]string
	if err := json.Unmarshal([]byte(attrs), &as); err != nil {
		return "", err
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = p.Quote(a[0]) + " " + a[1]
	}
	return pgDoOnce("CREATE TYPE " + p.Quote(t.schema, t.name) + " AS (" + strings.Join(parts, ", ") + ")"), nil
}

func (p Postgres) rangeCreate(ctx context.Context, db Querier, oid int64, t pgTypeInfo) (string, error) {
	var sub string
	var opc, coll, canon, diff sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT format_type(r.rngsubtype, NULL),
  CASE WHEN NOT oc.opcdefault THEN quote_ident(ocn.nspname) || '.' || quote_ident(oc.opcname) END,
  CASE WHEN r.rngcollation <> 0 AND r.rngcollation <> (SELECT typcollation FROM pg_catalog.pg_type WHERE oid = r.rngsubtype)
    THEN r.rngcollation::regcollation::text END,
  NULLIF(r.rngcanonical::regproc::text, '-'), NULLIF(r.rngsubdiff::regproc::text, '-')
FROM pg_catalog.pg_range r
JOIN pg_catalog.pg_opclass oc ON oc.oid = r.rngsubopc
JOIN pg_catalog.pg_namespace ocn ON ocn.oid = oc.opcnamespace
WHERE r.rngtypid = $1::oid`, oid).Scan(&sub, &opc, &coll, &canon, &diff); err != nil {
		return "", err
	}
	opts := []string{"SUBTYPE = " + sub}
	if opc.Valid {
		opts = append(opts, "SUBTYPE_OPCLASS = "+opc.String)
	}
	if coll.Valid {
		opts = append(opts, "COLLATION = "+coll.String)
	}
	if canon.Valid {
		opts = append(opts, "CANONICAL = "+canon.String)
	}
	if diff.Valid {
		opts = append(opts, "SUBTYPE_DIFF = "+diff.String)
	}
	return pgDoOnce("CREATE TYPE " + p.Quote(t.schema, t.name) + " AS RANGE (" + strings.Join(opts, ", ") + ")"), nil
}

// quoteLiteral is s as a PostgreSQL string constant (standard conforming
// strings): quotes doubled, and an E” constant with backslashes doubled
// when s has one.
func quoteLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		return "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}
