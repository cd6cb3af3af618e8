package dialect

import (
	"context"
	"database/sql"
	"strings"
)

// SchemaObjects implements Objects. It reads in one read-only
// transaction whose search_path is empty, as pg_dump does, so that every
// name in the definitions it reads is schema-qualified: an object is
// created in the target in its source schema, reading the same tables.
func (p Postgres) SchemaObjects(ctx context.Context, db TxBeginner, tables [][]string) ([]SchemaObject, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	tabs, err := p.oidArray(ctx, tx, tables) // resolved before the search_path is emptied
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `SELECT set_config('search_path', '', true)`); err != nil {
		return nil, err
	}
	var out []SchemaObject
	oids := map[string][]string{} // by catalog: the objects read
	add := func(cat, oid string, o SchemaObject) {
		oids[cat] = append(oids[cat], oid)
		out = append(out, o)
	}
	err = queryEach(ctx, tx, `SELECT p.oid::text, p.prokind = 'p', p.oid::regprocedure::text, pg_catalog.pg_get_functiondef(p.oid)
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE p.pronamespace IN (SELECT relnamespace FROM pg_catalog.pg_class WHERE oid = ANY ($1::oid[]))
  AND p.prokind IN ('f', 'p', 'w') AND l.lanname NOT IN ('c', 'internal') AND `+pgNotExtension("pg_catalog.pg_proc", "p.oid")+`
ORDER BY 3`, []any{tabs}, func(s []string) {
		add("pg_proc", s[0], SchemaObject{Object: Object{Kind: pgProcKind(s[1]), Name: s[2], Key: "pg_proc:" + s[0]}, Step: p.functionStep(s[2], s[1] == "true", s[3])})
	})
	if err != nil {
		return nil, err
	}
	err = queryEach(ctx, tx, `SELECT c.oid::text, c.relkind = 'm', n.nspname, c.relname, c.oid::regclass::text, pg_catalog.pg_get_viewdef(c.oid),
  COALESCE(array_to_string(c.reloptions, ', '), ''), c.relispopulated
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('v', 'm') AND c.relnamespace IN (SELECT relnamespace FROM pg_catalog.pg_class WHERE oid = ANY ($1::oid[]))
  AND `+pgNotExtension("pg_catalog.pg_class", "c.oid")+`
ORDER BY 5`, []any{tabs}, func(s []string) {
		st := p.viewStep([]string{s[2], s[3]}, s[4], s[5], s[6], s[1] == "true", s[7] == "true")
		add("pg_class", s[0], SchemaObject{Object: Object{Kind: st.Kind, Name: s[4], Key: "pg_class:" + s[0]}, Step: st})
	})
	if err != nil {
		return nil, err
	}
	var views []string
	views = append(views, oids["pg_class"]...)
	err = queryEach(ctx, tx, `SELECT t.oid::text, t.tgname, n.nspname, c.relname, c.oid::regclass::text, pg_catalog.pg_get_triggerdef(t.oid), t.tgenabled::text
FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE NOT t.tgisinternal AND t.tgparentid = 0
  AND (t.tgrelid = ANY ($1::oid[]) OR COALESCE(pg_catalog.pg_partition_root(t.tgrelid) = ANY ($1::oid[]), false) OR t.tgrelid = ANY ($2::oid[]))
ORDER BY 5, 2`, []any{tabs, "{" + strings.Join(views, ",") + "}"}, func(s []string) {
		st := p.triggerStep([]string{s[2], s[3]}, s[1], s[5], s[6])
		add("pg_trigger", s[0], SchemaObject{Object: Object{Kind: "trigger", Name: st.Name, Key: "pg_trigger:" + s[0]}, Step: st})
	})
	if err != nil {
		return nil, err
	}
	needs := map[string][]Ref{}
	arr := func(cat string) string { return "{" + strings.Join(oids[cat], ",") + "}" }
	err = queryEach(ctx, tx, pgObjectNeeds, []any{arr("pg_class"), arr("pg_proc"), arr("pg_trigger"), tabs}, func(s []string) {
		needs[s[0]] = append(needs[s[0]], Ref{Key: s[1], What: s[2]})
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Needs = needs[out[i].Key]
	}
	return out, tx.Commit()
}

// pgObjectNeeds yields (object key, needed key or "", what) for the
// views ($1), functions ($2) and triggers ($3) read: the views,
// materialized views and functions of user schemas each calls or reads
// (a function's from its signature or a BEGIN ATOMIC body: a body in a
// string records none), a trigger's function and view, and the tables of
// user schemas that are not among the copied ones ($4) nor their
// partitions.
var pgObjectNeeds = `WITH deps(src, cat, oid) AS (
  SELECT 'pg_class:' || r.ev_class, d.refclassid, d.refobjid
  FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = r.oid
  WHERE r.ev_class = ANY ($1::oid[]) AND d.refobjid <> r.ev_class
  UNION
  SELECT 'pg_proc:' || d.objid, d.refclassid, d.refobjid FROM pg_catalog.pg_depend d
  WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = ANY ($2::oid[]) AND d.deptype = 'n'
  UNION
  SELECT 'pg_trigger:' || t.oid, 'pg_catalog.pg_proc'::regclass, t.tgfoid FROM pg_catalog.pg_trigger t WHERE t.oid = ANY ($3::oid[])
  UNION
  SELECT 'pg_trigger:' || t.oid, 'pg_catalog.pg_class'::regclass, t.tgrelid FROM pg_catalog.pg_trigger t WHERE t.oid = ANY ($3::oid[])
), rels(src, oid) AS (
  SELECT src, oid FROM deps WHERE cat = 'pg_catalog.pg_class'::regclass
  UNION
  SELECT deps.src, ty.typrelid FROM deps JOIN pg_catalog.pg_type ty ON ty.oid = deps.oid
  WHERE deps.cat = 'pg_catalog.pg_type'::regclass AND ty.typrelid <> 0
)
SELECT rels.src, CASE WHEN c.relkind IN ('v', 'm') THEN 'pg_class:' || c.oid ELSE '' END,
  CASE c.relkind WHEN 'v' THEN 'view ' WHEN 'm' THEN 'materialized view ' ELSE 'table ' END || c.oid::regclass::text
FROM rels JOIN pg_catalog.pg_class c ON c.oid = rels.oid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE ` + pgUserSchema + ` AND ` + pgNotExtension("pg_catalog.pg_class", "c.oid") + ` AND c.relkind IN ('r', 'p', 'f', 'v', 'm', 'S')
  AND NOT (c.oid = ANY ($4::oid[]) OR COALESCE(pg_catalog.pg_partition_root(c.oid) = ANY ($4::oid[]), false))
UNION
SELECT deps.src, 'pg_proc:' || f.oid, 'function ' || f.oid::regprocedure::text
FROM deps JOIN pg_catalog.pg_proc f ON f.oid = deps.oid JOIN pg_catalog.pg_namespace n ON n.oid = f.pronamespace
WHERE deps.cat = 'pg_catalog.pg_proc'::regclass AND ` + pgUserSchema + ` AND ` + pgNotExtension("pg_catalog.pg_proc", "f.oid") + `
ORDER BY 1, 2, 3`

// pgProcKind is a routine's kind from prokind = 'p' as text.
func pgProcKind(procedure string) string {
	if procedure == "true" {
		return StepProcedure
	}
	return StepFunction
}

// functionStep creates a function or procedure (name as regprocedure
// spells it) from pg_get_functiondef's statement, with the bodies of
// LANGUAGE sql functions not checked at creation (as pg_dump does): one
// may read a view created after it.
func (p Postgres) functionStep(name string, procedure bool, def string) Step {
	kind := StepFunction
	if procedure {
		kind = StepProcedure
	}
	return Step{Kind: kind, Name: name,
		SQL:        "SET LOCAL check_function_bodies = off;\n" + strings.TrimSpace(def),
		Exists:     `SELECT to_regprocedure($1) IS NOT NULL`,
		ExistsArgs: []any{name}}
}

// viewStep creates a view or materialized view from pg_get_viewdef's
// query; display is its name as regclass spells it, options its
// reloptions ("check_option=local, security_barrier=true"). A
// materialized view is created with its data (the copied tables' own,
// after the load) unless the source's is not populated.
func (p Postgres) viewStep(name []string, display, query, options string, materialized, populated bool) Step {
	kind, create := StepView, "CREATE VIEW "
	if materialized {
		kind, create = StepMaterializedView, "CREATE MATERIALIZED VIEW "
	}
	s := create + p.Quote(name...)
	if options != "" {
		s += " WITH (" + options + ")"
	}
	s += " AS\n" + strings.TrimSuffix(strings.TrimSpace(query), ";")
	if materialized {
		if populated {
			s += "\nWITH DATA"
		} else {
			s += "\nWITH NO DATA"
		}
	}
	return Step{Kind: kind, Name: display, SQL: s,
		Exists:     `SELECT to_regclass($1) IS NOT NULL`,
		ExistsArgs: []any{p.Quote(name...)}}
}

// triggerStep creates a trigger from pg_get_triggerdef's statement, and
// sets it as the source has it when not simply enabled (tgenabled: O
// enabled, D disabled, R replica, A always), in the same statement.
func (p Postgres) triggerStep(table []string, name, def, enabled string) Step {
	s := strings.TrimSpace(def)
	tbl := p.Quote(table...)
	switch enabled {
	case "D":
		s += ";\nALTER TABLE " + tbl + " DISABLE TRIGGER " + p.Quote(name)
	case "R":
		s += ";\nALTER TABLE " + tbl + " ENABLE REPLICA TRIGGER " + p.Quote(name)
	case "A":
		s += ";\nALTER TABLE " + tbl + " ENABLE ALWAYS TRIGGER " + p.Quote(name)
	}
	return Step{Kind: StepTrigger, Table: table, Name: name + " on " + strings.Join(table, "."), SQL: s,
		Exists:     `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = to_regclass($1) AND tgname = $2)`,
		ExistsArgs: []any{tbl, name}}
}
