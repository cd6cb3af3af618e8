package dialect

import (
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// mysqlMaxName is the longest MySQL identifier, in bytes.
const mysqlMaxName = 64

// Create implements Definitions for a MySQL target. A MySQL def is
// reproduced as its server spells it; a PostgreSQL one is translated:
// identities become AUTO_INCREMENT, expressions go through translateExpr,
// and what has no MySQL form is reported in Notes. Constraint names,
// per database in MySQL, become <table>_<name> for a PostgreSQL def.
func (m MySQL) Create(def *TableDef, fence string) Created {
	var cr Created
	cross := def.Engine != plans.MySQL
	table := def.Name[len(def.Name)-1]
	defs := make([]string, 0, len(def.Columns)+4)
	auto := ""
	for _, c := range def.Columns {
		if cross && SequenceKey(def, c) {
			c.Identity = IdentitySerial // a key from a sequence: AUTO_INCREMENT
			m.sequenceNotes(def, c, &cr)
		}
		if c.Identity != "" && auto != "" {
			cr.Notes = append(cr.Notes, fmt.Sprintf("identity of column %s: not created, MySQL has one AUTO_INCREMENT column per table (%s)", c.Name, auto))
			c.Identity = ""
		}
		if cross || c.Collation == def.Collation || c.Base == "json" {
			c.Charset, c.Collation = "", "" // the table's (MariaDB's json: its own utf8mb4_bin)
		}
		d, ok := m.columnDef(c, cross, &cr)
		if !ok {
			cr.Skipped = append(cr.Skipped, c.Name)
			continue
		}
		if c.Identity != "" {
			auto = c.Name
		}
		defs = append(defs, d)
	}
	defs = append(defs, m.Quote(fence)+" bigint NOT NULL DEFAULT 0")
	if def.PrimaryKey != nil {
		defs = append(defs, "PRIMARY KEY ("+m.indexParts(def.PrimaryKey.Parts)+")")
	}
	// MySQL wants an AUTO_INCREMENT column first in some index, present
	// from the start: a non-unique one of def's is created here, else one
	// of its own.
	inTable := ""
	if auto != "" && (def.PrimaryKey == nil || def.PrimaryKey.Parts[0].Column != auto) {
		i := slices.IndexFunc(def.Indexes, func(x Index) bool {
			return !cross && !x.Unique && x.Where == "" && x.Method == "btree" && x.Parts[0].Column == auto
		})
		if i >= 0 {
			inTable = def.Indexes[i].Name
			defs = append(defs, "KEY "+m.Quote(inTable)+" ("+m.indexParts(def.Indexes[i].Parts)+")")
		} else {
			name := auto
			for slices.ContainsFunc(def.Indexes, func(x Index) bool { return x.Name == name }) {
				name += "_ai"
			}
			defs = append(defs, "KEY "+m.Quote(name)+" ("+m.Quote(auto)+")")
		}
	}
	for _, k := range def.Checks {
		expr := k.Expr
		if cross {
			t, err := translateExpr(k.Expr, def.Engine, plans.MySQL)
			if err != nil {
				cr.Notes = append(cr.Notes, fmt.Sprintf("check %s (%s): not created, %v", k.Name, k.Expr, err))
				continue
			}
			expr = t
		}
		name := k.Name
		if cross {
			name = mysqlUniqueName(table, name)
		}
		defs = append(defs, "CONSTRAINT "+m.Quote(name)+" CHECK "+parenthesized(expr))
	}
	tail := m.tableOptions(def, cross, &cr)
	if def.Comment != "" {
		tail += " COMMENT=" + typemap.MySQLString(def.Comment)
	}
	switch {
	case def.PartitionBy != "" && cross:
		cr.Notes = append(cr.Notes, fmt.Sprintf("partitioned table (PARTITION BY %s; partitions: %d): created as a plain table", def.PartitionBy, len(def.Partitions)))
		partitionNotes(def, &cr)
	case def.PartitionBy != "":
		tail += "\n" + def.PartitionBy
	}
	for _, t := range def.Types {
		if t.Kind != "enum" {
			cr.Notes = append(cr.Notes, fmt.Sprintf("%s type %s: not created, its columns have the mapped type", t.Kind, strings.Join(t.Name, ".")))
		}
	}
	cr.Table = "CREATE TABLE " + m.Quote(def.Name...) + " (\n  " + strings.Join(defs, ",\n  ") + "\n)" + tail
	for _, x := range def.Indexes {
		if x.Name == inTable {
			continue
		}
		if s, ok := m.indexStep(def, x, cross, &cr); ok {
			cr.Indexes = append(cr.Indexes, s)
		}
	}
	cr.ForeignKeys = m.foreignKeySteps(def, cross, &cr)
	return cr
}

// sequenceNotes note what of the sequence a key column c takes its values
// from an AUTO_INCREMENT column does not reproduce.
func (m MySQL) sequenceNotes(def *TableDef, c ColumnDef, cr *Created) {
	i := slices.IndexFunc(def.Sequences, func(s Sequence) bool { return slices.Equal(s.Name, c.Sequence) })
	if i < 0 {
		return
	}
	seq := def.Sequences[i]
	if seq.Increment != 1 || seq.Cycle {
		cr.Notes = append(cr.Notes, fmt.Sprintf("column %s: AUTO_INCREMENT in place of sequence %s, which steps by %d (cycle: %v); AUTO_INCREMENT steps by the server's auto_increment_increment and never cycles",
			c.Name, strings.Join(seq.Name, "."), seq.Increment, seq.Cycle))
	}
}

// partitionNotes note the primary keys, indexes and foreign keys that a
// PostgreSQL partitioned table's partitions declare on their own: the
// table is not partitioned here, and they hold for their partition's rows
// only.
func partitionNotes(def *TableDef, cr *Created) {
	for _, pt := range def.Partitions {
		name := pt.Name[len(pt.Name)-1]
		if pk := pt.PrimaryKey; pk != nil {
			cr.Notes = append(cr.Notes, fmt.Sprintf("primary key %s (%s) of partition %s: not created, the table is not partitioned here", pk.Name, strings.Join(pk.Columns(), ", "), name))
		}
		for _, x := range pt.Indexes {
			kind := "index"
			if x.Unique {
				kind = "unique index"
			}
			cr.Notes = append(cr.Notes, fmt.Sprintf("%s %s (%s) of partition %s: not created, the table is not partitioned here", kind, x.Name, strings.Join(x.Columns(), ", "), name))
		}
		for _, fk := range pt.ForeignKeys {
			cr.Notes = append(cr.Notes, fmt.Sprintf("foreign key %s (%s) of partition %s, referencing %s: not created, the table is not partitioned here",
				fk.Name, strings.Join(fk.Columns, ", "), name, strings.Join(fk.RefTable, ".")))
		}
	}
}

// tableOptions are the CREATE TABLE's options but the comment. A MySQL
// def keeps its default character set and collation, which its text
// columns compare and sort by (a case-insensitive collation finds 'AC/DC'
// for 'ac/dc', and a unique index refuses 'p1' after 'P1'): the
// application sees the same database. A PostgreSQL def's text compares by
// its bytes (its key's values do, and keys that PostgreSQL holds apart
// must stay apart): utf8mb4 with the binary NO PAD collation. The engine
// is InnoDB: the fenced batches need its transactions.
func (m MySQL) tableOptions(def *TableDef, cross bool, cr *Created) string {
	if e := def.StorageEngine; !cross && e != "" && !strings.EqualFold(e, "InnoDB") {
		cr.Notes = append(cr.Notes, fmt.Sprintf("storage engine %s: created InnoDB, which migrate's transactions need", e))
	}
	if cross || def.Collation == "" {
		return " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=" + m.collation()
	}
	return " ENGINE=InnoDB" + m.charsetClause(" DEFAULT CHARSET=", " COLLATE=", def.Charset, def.Collation)
}

// charsetClause names a character set and a collation, each after its
// keyword, "" for the one not given.
func (m MySQL) charsetClause(charsetKw, collateKw, charset, collation string) string {
	out := ""
	if charset != "" {
		out = charsetKw + m.Quote(charset)
	}
	if collation != "" {
		out += collateKw + m.Quote(collation)
	}
	return out
}

// columnDef is a column's definition; false: it is not created (a
// generated column whose expression has no translation).
func (m MySQL) columnDef(c ColumnDef, cross bool, cr *Created) (string, bool) {
	typ := c.Type
	if c.Base == "json" {
		typ = "json" // MariaDB shows JSON as longtext
	}
	typ += m.charsetClause(" CHARACTER SET ", " COLLATE ", c.Charset, c.Collation)
	d := m.Quote(c.Name) + " " + typ
	if c.Generated != "" {
		expr, stored := c.Generated, c.Stored
		if cross {
			t, err := translateExpr(c.Generated, plans.Postgres, plans.MySQL)
			if err != nil {
				cr.Notes = append(cr.Notes, fmt.Sprintf("generated column %s (%s): not created nor copied, %v", c.Name, c.Generated, err))
				return "", false
			}
			expr, stored = t, true
		}
		d += " GENERATED ALWAYS AS " + parenthesized(expr)
		if stored {
			d += " STORED"
		} else {
			d += " VIRTUAL"
		}
		if c.NotNull && !m.MariaDB { // MariaDB takes no NOT NULL on a generated column
			d += " NOT NULL"
		}
	} else {
		if c.NotNull {
			d += " NOT NULL"
		}
		if c.Identity == "" {
			if def := m.defaultClause(c, cross, cr); def != "" {
				d += " DEFAULT " + def
			}
		} else {
			if cross && c.Identity == IdentityAlways {
				cr.Notes = append(cr.Notes, fmt.Sprintf("identity always of column %s: AUTO_INCREMENT, which takes explicit values too", c.Name))
			}
			d += " AUTO_INCREMENT"
		}
		if c.OnUpdate != "" && !cross {
			d += " ON UPDATE " + c.OnUpdate
		}
	}
	if c.Comment != "" {
		d += " COMMENT " + typemap.MySQLString(c.Comment)
	}
	return d, true
}

// defaultClause is what follows DEFAULT, "" for no default.
func (m MySQL) defaultClause(c ColumnDef, cross bool, cr *Created) string {
	switch c.Default.Kind {
	case DefaultLiteral:
		if err := typemap.CheckMySQLConstant(c.Base, c.Default.Value); cross && err != nil {
			cr.Notes = append(cr.Notes, fmt.Sprintf("default %s of column %s: not created, %v", c.Default.Expr, c.Name, err))
			return ""
		}
		return m.literalDefault(c, cross)
	case DefaultNow:
		if !cross {
			return c.Default.Expr
		}
		switch c.Base {
		case "datetime", "timestamp":
			if a := typeArgs(c.Type); len(a) == 1 && a[0] != "0" {
				return "CURRENT_TIMESTAMP(" + a[0] + ")"
			}
			return "CURRENT_TIMESTAMP"
		case "date":
			return "(CURRENT_DATE)"
		}
		cr.Notes = append(cr.Notes, fmt.Sprintf("default %s of column %s: no current time default for type %s, none created", c.Default.Expr, c.Name, c.Type))
		return ""
	case DefaultExpr:
		if !cross {
			return parenthesized(c.Default.Expr)
		}
		if c.Sequence != nil {
			cr.Notes = append(cr.Notes, fmt.Sprintf("default %s of column %s: not created, MySQL has no sequences (only a key column takes AUTO_INCREMENT in their place)", c.Default.Expr, c.Name))
			return ""
		}
		t, err := translateExpr(c.Default.Expr, plans.Postgres, plans.MySQL)
		if err != nil {
			cr.Notes = append(cr.Notes, fmt.Sprintf("default %s of column %s: not created, %v", c.Default.Expr, c.Name, err))
			return ""
		}
		return parenthesized(t)
	}
	return ""
}

// literalDefault is a constant default as a literal of the column's
// (mapped) type: PostgreSQL's booleans as 1 and 0, numbers bare, the rest
// quoted; MySQL 8 takes a text, blob or json column's only in parentheses.
func (m MySQL) literalDefault(c ColumnDef, cross bool) string {
	v := c.Default.Value
	if cross && c.Base == "tinyint" {
		switch strings.ToLower(v) {
		case "true", "t", "yes", "on":
			return "1"
		case "false", "f", "no", "off":
			return "0"
		}
	}
	if mysqlNumeric(c.Base) && mysqlNumber.MatchString(v) {
		return v
	}
	lit := typemap.MySQLString(v)
	if !m.MariaDB && mysqlBlobLike(c.Base) {
		return "(" + lit + ")"
	}
	return lit
}

// mysqlBlobLike: a type whose default MySQL 8 takes only as an expression.
func mysqlBlobLike(base string) bool {
	return strings.HasSuffix(base, "text") || strings.HasSuffix(base, "blob") || base == "json" ||
		base == "geometry" || base == "point" || base == "linestring" || base == "polygon"
}

// typeArgs are a type's modifiers: "datetime(6)" gives [6].
func typeArgs(t string) []string {
	i, j := strings.IndexByte(t, '('), strings.IndexByte(t, ')')
	if i < 0 || j < i {
		return nil
	}
	a := strings.Split(t[i+1:j], ",")
	for k := range a {
		a[k] = strings.TrimSpace(a[k])
	}
	return a
}

// parenthesized is expr within parentheses, once.
func parenthesized(expr string) string {
	e := strings.TrimSpace(expr)
	if strings.HasPrefix(e, "(") && strings.HasSuffix(e, ")") {
		depth, quote := 0, byte(0)
		for i := 0; i < len(e); i++ {
			c := e[i]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"' || c == '`':
				quote = c
			case c == '(':
				depth++
			case c == ')':
				depth--
				if depth == 0 && i < len(e)-1 {
					return "(" + e + ")" // "(a) + (b)"
				}
			}
		}
		return e
	}
	return "(" + e + ")"
}

// mysqlUniqueName is a constraint's name made unique in the database:
// <table>_<name>, cut to 64 bytes on a character boundary.
func mysqlUniqueName(table, name string) string {
	n := table + "_" + name
	for len(n) > mysqlMaxName {
		_, size := lastRune(n)
		n = n[:len(n)-size]
	}
	return n
}

func lastRune(s string) (rune, int) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i]&0xC0 != 0x80 {
			return rune(s[i]), len(s) - i
		}
	}
	return 0, 1
}

// indexParts are an index's parts: `col`(prefix) DESC, (expr).
func (m MySQL) indexParts(parts []IndexPart) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		s := parenthesized(p.Expr)
		if p.Column != "" {
			s = m.Quote(p.Column)
			if p.Prefix > 0 {
				s += fmt.Sprintf("(%d)", p.Prefix)
			}
		}
		if p.Desc {
			s += " DESC"
		}
		out[i] = s
	}
	return strings.Join(out, ", ")
}
