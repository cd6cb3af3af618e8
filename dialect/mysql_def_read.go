package dialect

import (
	"context"
	"slices"
	"strings"
)

// NotMigrated implements Definitions: the views, triggers, routines and
// events of DATABASE(), and the table grants on tables to grantees other
// than the current user.
func (m MySQL) NotMigrated(ctx context.Context, db Querier, tables [][]string) ([]Object, error) {
	var out []Object
	// A view's note names the given tables its definition reads.
	err := queryEach(ctx, db, `SELECT table_name, COALESCE(view_definition, '') FROM information_schema.views
WHERE table_schema = DATABASE() ORDER BY table_name`, nil, func(s []string) {
		var reads []string
		for _, t := range tables {
			if strings.Contains(s[1], m.Quote(t[len(t)-1])) {
				reads = append(reads, strings.Join(t, "."))
			}
		}
		note := "view"
		if len(reads) > 0 {
			note = "reads " + strings.Join(reads, ", ")
		}
		out = append(out, Object{Kind: "view", Name: s[0], Note: note, Key: "view:" + s[0]})
	})
	if err != nil {
		return nil, err
	}
	err = queryEach(ctx, db, `SELECT trigger_name, event_object_table, action_timing, event_manipulation FROM information_schema.triggers
WHERE trigger_schema = DATABASE() ORDER BY trigger_name`, nil, func(s []string) {
		out = append(out, Object{Kind: "trigger", Name: s[0], Note: s[2] + " " + s[3] + " on table " + s[1], Key: "trigger:" + s[0]})
	})
	if err != nil {
		return nil, err
	}
	err = queryEach(ctx, db, `SELECT routine_name, LOWER(routine_type) FROM information_schema.routines
WHERE routine_schema = DATABASE() ORDER BY routine_type, routine_name`, nil, func(s []string) {
		out = append(out, Object{Kind: s[1], Name: s[0], Note: s[1] + " of the database", Key: s[1] + ":" + s[0]})
	})
	if err != nil {
		return nil, err
	}
	err = queryEach(ctx, db, `SELECT event_name, LOWER(status) FROM information_schema.events
WHERE event_schema = DATABASE() ORDER BY event_name`, nil, func(s []string) {
		out = append(out, Object{Kind: "event", Name: s[0], Note: "scheduled event (" + s[1] + ")"})
	})
	if err != nil {
		return nil, err
	}
	// Grants: privileges of one grantee on one table, together.
	type grant struct{ grantee, table string }
	privs := map[grant][]string{}
	var order []grant
	err = queryEach(ctx, db, `SELECT grantee, IF(table_schema = DATABASE(), '', table_schema), table_name, privilege_type
FROM information_schema.table_privileges
WHERE grantee <> CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')
ORDER BY grantee, table_schema, table_name, privilege_type`, nil, func(s []string) {
		name := []string{s[2]}
		if s[1] != "" {
			name = []string{s[1], s[2]}
		}
		if !slices.ContainsFunc(tables, func(t []string) bool { return slices.Equal(t, name) }) {
			return
		}
		g := grant{s[0], strings.Join(name, ".")}
		if privs[g] == nil {
			order = append(order, g)
		}
		privs[g] = append(privs[g], s[3])
	})
	if err != nil {
		return nil, err
	}
	for _, g := range order {
		out = append(out, Object{Kind: "grant", Name: g.table, Note: strings.Join(privs[g], ", ") + " on " + g.table + " to " + g.grantee})
	}
	return out, nil
}

// queryEach runs a query of text columns and calls f with each row.
func queryEach(ctx context.Context, db Querier, q string, args []any, f func([]string)) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	for rows.Next() {
		vals := make([]string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		f(vals)
	}
	return rows.Err()
}

// mysqlMembers are the members of an ENUM or SET column_type
// ("enum('a','it”s','a\\b')"), unquoted, case kept.
func mysqlMembers(columnType string) []string {
	open := strings.IndexByte(columnType, '(')
	if open < 0 {
		return nil
	}
	s := columnType[open+1:]
	var out []string
	for i := 0; i < len(s); i++ {
		if s[i] != '\'' {
			continue
		}
		var b strings.Builder
		for i++; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\'' && i+1 < len(s) && s[i+1] == '\'':
				b.WriteByte('\'')
				i++
			case c == '\'':
				goto done
			case c == '\\' && i+1 < len(s):
				i++
				b.WriteString(mysqlEscape(s[i]))
			default:
				b.WriteByte(c)
			}
		}
	done:
		out = append(out, b.String())
	}
	return out
}

// mysqlEscape is what a backslash escape \c stands for.
func mysqlEscape(c byte) string {
	switch c {
	case '0':
		return "\x00"
	case 'n':
		return "\n"
	case 'r':
		return "\r"
	case 't':
		return "\t"
	case 'b':
		return "\b"
	case 'Z':
		return "\x1a"
	}
	return string(c)
}

// mysqlUnquote is the value of a quoted MySQL string literal ('it”s').
func mysqlUnquote(lit string) string {
	if m := mysqlMembers("(" + lit + ")"); len(m) == 1 {
		return m[0]
	}
	return lit
}

// mysqlNumeric: a MySQL base type whose literals are numbers.
func mysqlNumeric(base string) bool {
	switch base {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric",
		"float", "double", "double precision", "real", "year":
		return true
	}
	return false
}
