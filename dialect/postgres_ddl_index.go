package dialect

import (
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/plans"
)

// indexStep is the post-load step creating index x of def, or false
// (noted) when it cannot be created here. A unique constraint stays a
// constraint; a MySQL index is named <table>_<index>, PostgreSQL's index
// names being per schema.
func (p Postgres) indexStep(def *TableDef, x Index, cr *Created) (Step, bool) {
	same := def.Engine == plans.Postgres
	tbl := p.Quote(def.Name...)
	name := x.Name
	if !same {
		name = def.Name[len(def.Name)-1] + "_" + x.Name
	}
	name = pgName(name)
	method := x.Method
	if !same {
		switch method {
		case "fulltext", "spatial":
			cr.Notes = append(cr.Notes, fmt.Sprintf("%s index %s not created: PostgreSQL has no %s index over plain columns (use a tsvector or PostGIS)", strings.ToUpper(method), x.Name, method))
			return Step{}, false
		}
		method = "btree"
	}
	exists := Step{Kind: StepIndex, Table: def.Name, Name: name,
		Exists:     `SELECT to_regclass($1) IS NOT NULL`,
		ExistsArgs: []any{p.Quote(sibling(def.Name, name)...)}}
	nullsNotDistinct := ""
	if same && strings.Contains(x.Def, " NULLS NOT DISTINCT") {
		nullsNotDistinct = " NULLS NOT DISTINCT"
	}
	if same && x.Constraint && x.Where == "" && (method == "" || method == "btree") {
		if cols, ok := p.plainColumns(x, def, cr); ok {
			exists.SQL = "ALTER TABLE " + tbl + " ADD CONSTRAINT " + p.Quote(name) + " UNIQUE" + nullsNotDistinct + " (" + p.quoteList(cols) + ")"
			exists.Exists = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conrelid = $1::regclass AND conname = $2)`
			exists.ExistsArgs = []any{tbl, name}
			return exists, true
		}
		return Step{}, false
	}
	parts := make([]string, 0, len(x.Parts))
	for _, pt := range x.Parts {
		var s string
		switch {
		case pt.Column != "" && slices.Contains(cr.Skipped, pt.Column):
			cr.Notes = append(cr.Notes, fmt.Sprintf("index %s not created: column %s is not created", x.Name, pt.Column))
			return Step{}, false
		case pt.Column != "":
			s = p.Quote(pt.Column)
			if pt.Prefix > 0 {
				cr.Notes = append(cr.Notes, fmt.Sprintf("index %s: the prefix (%d) of column %s is indexed whole", x.Name, pt.Prefix, pt.Column))
			}
		default:
			e, err := translateExpr(pt.Expr, def.Engine, plans.Postgres)
			if err != nil {
				cr.Notes = append(cr.Notes, fmt.Sprintf("index %s not created: expression %s: %v", x.Name, pt.Expr, err))
				return Step{}, false
			}
			s = "(" + e + ")"
		}
		if pt.Desc {
			s += " DESC"
		}
		parts = append(parts, s)
	}
	s := "CREATE "
	if x.Unique {
		s += "UNIQUE "
	}
	s += "INDEX IF NOT EXISTS " + p.Quote(name) + " ON " + tbl
	if method != "" {
		s += " USING " + method
	}
	s += " (" + strings.Join(parts, ", ") + ")" + nullsNotDistinct
	if x.Where != "" {
		w, err := translateExpr(x.Where, def.Engine, plans.Postgres)
		if err != nil {
			cr.Notes = append(cr.Notes, fmt.Sprintf("index %s not created: predicate %s: %v", x.Name, x.Where, err))
			return Step{}, false
		}
		s += " WHERE " + w
	}
	exists.SQL = s
	return exists, true
}
