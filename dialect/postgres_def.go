package dialect

import (
	"context"
	"slices"
	"strconv"
	"strings"
)

// ListTables implements Definitions: the ordinary and partitioned tables
// (not their partitions) of the schemas on the search_path, migrate's
// helper tables (_migrate_*) aside.
func (p Postgres) ListTables(ctx context.Context, db Querier) ([][]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT n.nspname, c.relname
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname = ANY (current_schemas(false))
  AND c.relname NOT LIKE '\_migrate\_%'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		t := make([]string, 2)
		if err := rows.Scan(&t[0], &t[1]); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b []string) int { return slices.Compare(a, b) })
	return out, rows.Err()
}

// pgUserSchema is a condition on a namespace n: not a system one.
const pgUserSchema = `n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'`

// pgNotExtension is a condition on an object o of catalog cat: not a
// member of an extension.
func pgNotExtension(cat, o string) string {
	return `NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e WHERE e.classid = '` + cat + `'::regclass AND e.objid = ` + o + ` AND e.deptype = 'e')`
}

// oidArray is the oids of the tables that exist, as an oid[] literal
// ("{16384,16390}") to bind.
func (p Postgres) oidArray(ctx context.Context, db Querier, tables [][]string) (string, error) {
	oids := make([]string, 0, len(tables))
	for _, t := range tables {
		var oid *int64
		if err := db.QueryRowContext(ctx, `SELECT to_regclass($1)::oid::bigint`, p.regclass(t)).Scan(&oid); err != nil {
			return "", err
		}
		if oid != nil {
			oids = append(oids, strconv.FormatInt(*oid, 10))
		}
	}
	return "{" + strings.Join(oids, ",") + "}", nil
}

// NotMigrated implements Definitions: views and materialized views (with
// the given tables they read), triggers, rules, policies, exclusion
// constraints and grants of the given tables, routines, and sequences no
// column owns that no default of the given tables uses (those are created
// with the table that uses them, see Create).
func (p Postgres) NotMigrated(ctx context.Context, db Querier, tables [][]string) ([]Object, error) {
	arr, err := p.oidArray(ctx, db, tables)
	if err != nil {
		return nil, err
	}
	var out []Object
	queries := []struct {
		sql  string
		args []any
	}{
		// Views: a note naming the given tables each reads.
		{`SELECT CASE c.relkind WHEN 'v' THEN 'view' ELSE 'materialized view' END, c.oid::regclass::text,
  COALESCE('reads ' || (SELECT string_agg(DISTINCT d.refobjid::regclass::text, ', ')
    FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = r.oid
    WHERE r.ev_class = c.oid AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid <> c.oid AND d.refobjid = ANY ($1::oid[])), ''),
  'pg_class:' || c.oid
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('v', 'm') AND ` + pgUserSchema + ` AND ` + pgNotExtension("pg_catalog.pg_class", "c.oid") + `
ORDER BY 2`, []any{arr}},
		{`SELECT 'trigger', t.tgname, 'on table ' || t.tgrelid::regclass::text, 'pg_trigger:' || t.oid
FROM pg_catalog.pg_trigger t WHERE NOT t.tgisinternal AND t.tgrelid = ANY ($1::oid[])
ORDER BY t.tgrelid::regclass::text, 2`, []any{arr}},
		{`SELECT 'rule', r.rulename, 'on table ' || r.ev_class::regclass::text, ''
FROM pg_catalog.pg_rewrite r WHERE r.rulename <> '_RETURN' AND r.ev_class = ANY ($1::oid[])
ORDER BY r.ev_class::regclass::text, 2`, []any{arr}},
		{`SELECT 'policy', pol.polname, 'row level security on table ' || pol.polrelid::regclass::text, ''
FROM pg_catalog.pg_policy pol WHERE pol.polrelid = ANY ($1::oid[])
ORDER BY pol.polrelid::regclass::text, 2`, []any{arr}},
		{`SELECT 'exclusion constraint', con.conname, 'on table ' || con.conrelid::regclass::text || ': ' || pg_get_constraintdef(con.oid), ''
FROM pg_catalog.pg_constraint con WHERE con.contype = 'x' AND con.conrelid = ANY ($1::oid[])
ORDER BY con.conrelid::regclass::text, 2`, []any{arr}},
		{`SELECT 'grant', g.tbl, string_agg(g.privilege_type, ', ' ORDER BY g.privilege_type) || ' on ' || g.tbl || ' to ' || g.grantee, ''
FROM (SELECT c.oid::regclass::text AS tbl, a.privilege_type,
    CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END AS grantee
  FROM pg_catalog.pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
  WHERE c.oid = ANY ($1::oid[]) AND a.grantee <> c.relowner) g
GROUP BY g.tbl, g.grantee
ORDER BY 2, 3`, []any{arr}},
		{`SELECT CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END, p.oid::regprocedure::text, '', 'pg_proc:' || p.oid
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE ` + pgUserSchema + ` AND ` + pgNotExtension("pg_catalog.pg_proc", "p.oid") + `
ORDER BY 2`, nil},
		{`SELECT 'sequence', c.oid::regclass::text, 'owned by no column', ''
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'S' AND ` + pgUserSchema + ` AND ` + pgNotExtension("pg_catalog.pg_class", "c.oid") + `
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid
    AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjsubid > 0 AND d.deptype IN ('a', 'i'))
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_attrdef ad ON ad.oid = d.objid
    WHERE d.classid = 'pg_catalog.pg_attrdef'::regclass AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = c.oid
      AND ad.adrelid = ANY ($1::oid[]))
ORDER BY 2`, []any{arr}},
	}
	for _, q := range queries {
		rows, err := db.QueryContext(ctx, q.sql, q.args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var o Object
			if err := rows.Scan(&o.Kind, &o.Name, &o.Note, &o.Key); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, o)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
