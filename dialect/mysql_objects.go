package dialect

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// SchemaObjects implements Objects: the routines, views and triggers of
// DATABASE(), each as SHOW CREATE gives it (without the current
// database's name in it) less its DEFINER clause, so that the migrating
// user becomes the definer; SQL SECURITY is kept. A view's needs are
// found in its definition as information_schema spells it, every name
// qualified by its database.
func (m MySQL) SchemaObjects(ctx context.Context, db TxBeginner, tables [][]string) ([]SchemaObject, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	var current string
	if err := tx.QueryRowContext(ctx, `SELECT DATABASE()`).Scan(&current); err != nil {
		return nil, err
	}
	copied := map[string]bool{}
	for _, t := range tables {
		if len(t) == 1 || t[0] == current {
			copied[t[len(t)-1]] = true
		}
	}
	kinds := map[string]string{} // name in DATABASE() -> table, view, function (a procedure is never read by a view)
	schemas := map[string]bool{}
	err = queryEach(ctx, tx, `SELECT table_name, IF(table_type = 'VIEW', 'view', 'table') FROM information_schema.tables WHERE table_schema = DATABASE()`, nil, func(s []string) {
		kinds[s[0]] = s[1]
	})
	if err == nil {
		err = queryEach(ctx, tx, `SELECT schema_name FROM information_schema.schemata`, nil, func(s []string) { schemas[s[0]] = true })
	}
	var routines, views, triggers [][]string
	if err == nil {
		err = queryEach(ctx, tx, `SELECT routine_name, LOWER(routine_type) FROM information_schema.routines
WHERE routine_schema = DATABASE() ORDER BY routine_type, routine_name`, nil, func(s []string) {
			routines = append(routines, s)
			if s[1] == StepFunction {
				kinds[s[0]] = StepFunction
			}
		})
	}
	if err == nil {
		err = queryEach(ctx, tx, `SELECT table_name, COALESCE(view_definition, '') FROM information_schema.views
WHERE table_schema = DATABASE() ORDER BY table_name`, nil, func(s []string) { views = append(views, s) })
	}
	if err == nil {
		err = queryEach(ctx, tx, `SELECT trigger_name, event_object_table FROM information_schema.triggers
WHERE trigger_schema = DATABASE() ORDER BY event_object_table, action_timing, event_manipulation, action_order`, nil, func(s []string) {
			if copied[s[1]] {
				triggers = append(triggers, s)
			}
		})
	}
	if err != nil {
		return nil, err
	}
	var out []SchemaObject
	for _, r := range routines {
		mode, stmt, err := m.showCreate(ctx, tx, strings.ToUpper(r[1]), r[0])
		if err != nil {
			return nil, err
		}
		if stmt != "" { // "": the user may not read its body; NotMigrated lists it
			out = append(out, SchemaObject{Object: Object{Kind: r[1], Name: r[0], Key: r[1] + ":" + r[0]}, Step: m.routineStep(r[1], r[0], mode, stmt)})
		}
	}
	for _, v := range views {
		_, stmt, err := m.showCreate(ctx, tx, "VIEW", v[0])
		if err != nil {
			return nil, err
		}
		if stmt == "" {
			continue
		}
		o := SchemaObject{Object: Object{Kind: StepView, Name: v[0], Key: "view:" + v[0]}, Step: m.viewStep(v[0], stmt)}
		o.Needs = mysqlViewNeeds(v[1], current, kinds, schemas, copied)
		out = append(out, o)
	}
	for _, t := range triggers {
		mode, stmt, err := m.showCreate(ctx, tx, "TRIGGER", t[0])
		if err != nil {
			return nil, err
		}
		if stmt != "" {
			out = append(out, SchemaObject{Object: Object{Kind: StepTrigger, Name: t[0], Key: "trigger:" + t[0]}, Step: m.triggerStep(t[1], t[0], mode, stmt)})
		}
	}
	return out, tx.Commit()
}

// showCreate runs SHOW CREATE of an object of DATABASE() and returns its
// sql_mode ("" for a view) and its statement ("" when the server does not
// show it to this user).
func (m MySQL) showCreate(ctx context.Context, q Querier, what, name string) (mode, stmt string, err error) {
	rows, err := q.QueryContext(ctx, "SHOW CREATE "+what+" "+m.Quote(name))
	if err != nil {
		return "", "", fmt.Errorf("SHOW CREATE %s %s: %w", what, name, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", "", err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return "", "", err
		}
		return "", "", fmt.Errorf("SHOW CREATE %s %s: no row", what, name)
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", "", err
	}
	if what == "VIEW" { // View, Create View, ...
		return "", vals[1].String, rows.Err()
	}
	// Name, sql_mode, the statement, ...
	return vals[1].String, vals[2].String, rows.Err()
}

// routineStep creates a function or procedure from SHOW CREATE's
// statement without its definer, under the sql_mode it was created with
// (mysqlWithMode).
func (m MySQL) routineStep(kind, name, mode, stmt string) Step {
	return Step{Kind: kind, Name: name, SQL: m.withMode(mode, mysqlWithoutDefiner(stmt)),
		Exists:     `SELECT COUNT(*) > 0 FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_type = ? AND routine_name = ?`,
		ExistsArgs: []any{strings.ToUpper(kind), name}}
}

// viewStep creates a view from SHOW CREATE VIEW's statement without its
// definer (ALGORITHM, SQL SECURITY and the CHECK OPTION kept).
func (m MySQL) viewStep(name, stmt string) Step {
	return Step{Kind: StepView, Name: name, SQL: mysqlWithoutDefiner(stmt),
		Exists:     `SELECT COUNT(*) > 0 FROM information_schema.views WHERE table_schema = DATABASE() AND table_name = ?`,
		ExistsArgs: []any{name}}
}

// triggerStep creates a trigger of table from SHOW CREATE TRIGGER's
// statement without its definer, under its sql_mode. Triggers are
// created in their action order, which the server then keeps.
func (m MySQL) triggerStep(table, name, mode, stmt string) Step {
	return Step{Kind: StepTrigger, Table: []string{table}, Name: name, SQL: m.withMode(mode, mysqlWithoutDefiner(stmt)),
		Exists:     `SELECT COUNT(*) > 0 FROM information_schema.triggers WHERE trigger_schema = DATABASE() AND trigger_name = ?`,
		ExistsArgs: []any{name}}
}

// withMode runs stmt under the sql_mode a routine or trigger was created
// with, where the server can say so for one statement (MariaDB's SET
// STATEMENT; MySQL has no such form: there it takes the session's).
func (m MySQL) withMode(mode, stmt string) string {
	if !m.MariaDB || strings.Trim(mode, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_,0123456789") != "" {
		return stmt
	}
	return "SET STATEMENT sql_mode = '" + mode + "' FOR " + stmt
}

// mysqlWithoutDefiner is a CREATE statement as SHOW CREATE gives it
// without its DEFINER=user@host clause ("CREATE ALGORITHM=UNDEFINED
// DEFINER=`u`@`%` SQL SECURITY DEFINER VIEW ..." gives "CREATE
// ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW ..."); stmt unchanged when
// it has none.
func mysqlWithoutDefiner(stmt string) string {
	const create = "CREATE "
	if len(stmt) < len(create) || !strings.EqualFold(stmt[:len(create)], create) {
		return stmt
	}
	i := len(create)
	if rest := stmt[i:]; len(rest) > 10 && strings.EqualFold(rest[:10], "ALGORITHM=") {
		sp := strings.IndexByte(rest, ' ')
		if sp < 0 {
			return stmt
		}
		i += sp + 1
	}
	const definer = "DEFINER="
	if len(stmt)-i < len(definer) || !strings.EqualFold(stmt[i:i+len(definer)], definer) {
		return stmt
	}
	j := mysqlAccountPart(stmt, i+len(definer))
	if j < len(stmt) && stmt[j] == '@' {
		j = mysqlAccountPart(stmt, j+1)
	}
	if j < len(stmt) && stmt[j] == ' ' {
		j++
	}
	return stmt[:i] + stmt[j:]
}

// mysqlAccountPart returns where the user or host name starting at i
// ends: a quoted name (`x`, 'x' or "x", the quote doubled inside) or a
// bare one up to '@' or a space.
func mysqlAccountPart(s string, i int) int {
	if i >= len(s) {
		return i
	}
	if q := s[i]; q == '`' || q == '\'' || q == '"' {
		for j := i + 1; j < len(s); j++ {
			if s[j] == q {
				if j+1 < len(s) && s[j+1] == q {
					j++
					continue
				}
				return j + 1
			}
		}
		return len(s)
	}
	j := i
	for j < len(s) && s[j] != '@' && s[j] != ' ' {
		j++
	}
	return j
}

// mysqlViewNeeds finds what a view's definition (information_schema's,
// every table and view qualified by its database) needs: the views and
// functions of the database it reads or calls, the tables of the
// database not copied, and anything of another database.
func mysqlViewNeeds(def, current string, kinds map[string]string, schemas, copied map[string]bool) []Ref {
	var out []Ref
	seen := map[string]bool{}
	need := func(r Ref) {
		if !seen[r.Key+"\x00"+r.What] {
			seen[r.Key+"\x00"+r.What] = true
			out = append(out, r)
		}
	}
	for _, ch := range mysqlNameChains(def) {
		name, call := ch.parts, ch.call
		if len(name) >= 2 && name[0] != current && schemas[name[0]] {
			what := "table "
			if call {
				what = "function "
			}
			need(Ref{What: what + name[0] + "." + name[1]})
			continue
		}
		if len(name) >= 2 && name[0] == current {
			name = name[1:]
		} else if !call {
			continue // a column of an alias, or a name of another clause
		}
		switch k := kinds[name[0]]; {
		case call && k == StepFunction:
			need(Ref{Key: "function:" + name[0], What: "function " + name[0]})
		case call:
		case k == "view":
			need(Ref{Key: "view:" + name[0], What: "view " + name[0]})
		case k == "table" && !copied[name[0]]:
			need(Ref{What: "table " + name[0]})
		}
	}
	return out
}

// mysqlNameChain is a dotted chain of quoted names in a statement
// (`db`.`t`.`c`), and whether a '(' follows it (a call).
type mysqlNameChain struct {
	parts []string
	call  bool
}

// mysqlNameChains lists the chains of backquoted names in a statement,
// string literals skipped.
func mysqlNameChains(s string) []mysqlNameChain {
	var out []mysqlNameChain
	var cur []string
	end := func(next byte) {
		if len(cur) > 0 {
			out = append(out, mysqlNameChain{parts: cur, call: next == '('})
			cur = nil
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"':
			end(c)
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '`':
			var b strings.Builder
			for i++; i < len(s); i++ {
				if s[i] == '`' {
					if i+1 < len(s) && s[i+1] == '`' {
						b.WriteByte('`')
						i++
						continue
					}
					break
				}
				b.WriteByte(s[i])
			}
			cur = append(cur, b.String())
			if i+1 < len(s) && s[i+1] == '.' {
				i++ // the chain goes on
				continue
			}
			next := byte(0)
			if i+1 < len(s) {
				next = s[i+1]
			}
			end(next)
		default:
			end(c)
		}
	}
	end(0)
	return out
}
