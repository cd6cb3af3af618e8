package dialect

import (
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/plans"
)

// indexStep is the post-load step creating index x of def; false when it
// is not created (reported in cr.Notes).
func (m MySQL) indexStep(def *TableDef, x Index, cross bool, cr *Created) (Step, bool) {
	note := func(why string) (Step, bool) {
		kind := "index"
		if x.Unique {
			kind = "unique index"
		}
		parts := x.Columns()
		for i, p := range x.Parts {
			if p.Column == "" {
				parts[i] = p.Expr
			}
		}
		cr.Notes = append(cr.Notes, fmt.Sprintf("%s %s (%s): not created, %s", kind, x.Name, strings.Join(parts, ", "), why))
		return Step{}, false
	}
	parts := slices.Clone(x.Parts)
	kind := "INDEX"
	using := ""
	switch x.Method {
	case "", "btree":
	case "fulltext", "spatial":
		kind = strings.ToUpper(x.Method) + " INDEX"
	case "hash":
		if !cross {
			using = " USING HASH"
		}
	default:
		return note("MySQL has no " + x.Method + " index")
	}
	if x.Unique && kind == "INDEX" {
		kind = "UNIQUE INDEX"
	}
	if cross {
		if x.Where != "" {
			if x.Unique {
				return note("a partial unique index (WHERE " + x.Where + ") has no MySQL form; a full one would refuse rows the source holds")
			}
			return note("a partial index (WHERE " + x.Where + ") has no MySQL form")
		}
		// Text and blob columns are indexed by a prefix in MySQL: a
		// non-unique index shares the key's 3072 bytes among them; a
		// unique one on a prefix is not the same constraint.
		var long []int
		for i, p := range parts {
			if p.Column == "" {
				return note("expression index parts are not translated")
			}
			c := slices.IndexFunc(def.Columns, func(c ColumnDef) bool { return c.Name == p.Column })
			if c >= 0 && def.Columns[c].Base == "json" {
				return note("MySQL does not index a json column")
			}
			if c >= 0 && p.Prefix == 0 && mysqlBlobLike(def.Columns[c].Base) {
				long = append(long, i)
			}
		}
		if len(long) > 0 && kind != "FULLTEXT INDEX" {
			if x.Unique {
				return note("its text columns are indexed by a prefix in MySQL, which would not be the same constraint")
			}
			for _, i := range long {
				parts[i].Prefix = maxKeyPrefix / len(long)
			}
		}
	}
	cond, args := m.where(def.Name)
	return Step{
		Kind:       StepIndex,
		Table:      def.Name,
		Name:       x.Name,
		SQL:        "ALTER TABLE " + m.Quote(def.Name...) + " ADD " + kind + " " + m.Quote(x.Name) + " (" + m.indexParts(parts) + ")" + using,
		Exists:     "SELECT COUNT(*) > 0 FROM information_schema.statistics WHERE " + cond + " AND index_name = ?",
		ExistsArgs: append(args, x.Name),
	}, true
}

// maxKeyPrefix is the characters of utf8mb4 text an InnoDB key holds.
const maxKeyPrefix = 3072 / 4

// ForeignKeySteps implements Definitions.
func (m MySQL) ForeignKeySteps(def *TableDef) []Step {
	return m.foreignKeySteps(def, def.Engine != plans.MySQL, &Created{})
}

// foreignKeySteps are the steps adding def's foreign keys.
func (m MySQL) foreignKeySteps(def *TableDef, cross bool, cr *Created) []Step {
	table := def.Name[len(def.Name)-1]
	var out []Step
	for _, fk := range def.ForeignKeys {
		name := fk.Name
		if cross {
			name = mysqlUniqueName(table, name)
		}
		sql := "ALTER TABLE " + m.Quote(def.Name...) + " ADD CONSTRAINT " + m.Quote(name) +
			" FOREIGN KEY (" + m.quoteList(fk.Columns) + ") REFERENCES " + m.Quote(fk.RefTable...) + " (" + m.quoteList(fk.RefColumns) + ")"
		for _, a := range []struct{ on, rule string }{{"DELETE", fk.OnDelete}, {"UPDATE", fk.OnUpdate}} {
			switch a.rule {
			case "", "NO ACTION", "RESTRICT":
				if a.rule != "" {
					sql += " ON " + a.on + " " + a.rule
				}
			case "SET DEFAULT": // InnoDB refuses it
				cr.Notes = append(cr.Notes, fmt.Sprintf("foreign key %s: ON %s SET DEFAULT is not supported by InnoDB, created without it (NO ACTION)", fk.Name, a.on))
			default:
				sql += " ON " + a.on + " " + a.rule
			}
		}
		cond, args := m.where(def.Name)
		out = append(out, Step{
			Kind:       StepForeignKey,
			Table:      def.Name,
			Name:       name,
			SQL:        sql,
			Exists:     "SELECT COUNT(*) > 0 FROM information_schema.table_constraints WHERE " + cond + " AND constraint_name = ? AND constraint_type = 'FOREIGN KEY'",
			ExistsArgs: append(args, name),
		})
	}
	return out
}

// DropForeignKey implements Definitions.
func (m MySQL) DropForeignKey(table []string, name string) string {
	return "ALTER TABLE " + m.Quote(table...) + " DROP FOREIGN KEY " + m.Quote(name)
}

// SequenceSteps implements Definitions: the AUTO_INCREMENT counter set
// above the column's highest value and to at least the column's Next (the
// source's counter: an emptied table's 989 stays 989), never lowered
// (ALTER TABLE … AUTO_INCREMENT = n sets it to n even below the current
// counter, if above the highest value). The counter is
// information_schema.tables', which MySQL 8 caches
// (information_schema_stats_expiry); MariaDB's is the live one.
func (m MySQL) SequenceSteps(def *TableDef) []Step {
	var out []Step
	for _, c := range def.Columns {
		if c.Identity == "" || len(out) > 0 { // one per table
			continue
		}
		cond, args := m.where(def.Name)
		floor := ""
		if c.Next > 1 {
			floor, args = ", ?", append(args, c.Next)
		}
		out = append(out, Step{
			Kind:  StepSequence,
			Table: def.Name,
			Name:  c.Name,
			SQL:   "ALTER TABLE " + m.Quote(def.Name...) + " AUTO_INCREMENT = {{n}}",
			Value: "SELECT GREATEST(COALESCE(MAX(" + m.Quote(c.Name) + "), 0) + 1, COALESCE((SELECT MAX(auto_increment) FROM information_schema.tables WHERE " +
				cond + "), 1)" + floor + ") FROM " + m.Quote(def.Name...),
			ValueArgs: args,
		})
	}
	return out
}
