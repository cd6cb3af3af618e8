package dialect

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// pgMaxName is PostgreSQL's longest identifier, in bytes (NAMEDATALEN-1).
const pgMaxName = 63

// pgName is name cut to pgMaxName bytes, on a character boundary.
func pgName(name string) string {
	if len(name) <= pgMaxName {
		return name
	}
	n := pgMaxName
	for n > 0 && name[n]&0xC0 == 0x80 {
		n--
	}
	return name[:n]
}

// sibling is an object named name in table's schema (table unqualified:
// on the search_path).
func sibling(table []string, name string) []string {
	return append(append([]string{}, table[:len(table)-1]...), name)
}

// serialSeq is the sequence a serial column col of table is given.
func serialSeq(table []string, col string) []string {
	return sibling(table, pgName(table[len(table)-1]+"_"+col+"_seq"))
}

// Create implements Definitions. A PostgreSQL def is reproduced as the
// catalog spells it; a MySQL one is translated (pgColumn, pgCrossIndex),
// what has no translation noted.
func (p Postgres) Create(def *TableDef, fence string) Created {
	var cr Created
	same := def.Engine == plans.Postgres
	tbl := p.Quote(def.Name...)
	if same {
		for _, t := range def.Types {
			cr.Before = append(cr.Before, t.Create)
		}
		for _, seq := range def.Sequences {
			cr.Before = append(cr.Before, p.createSequence(seq))
		}
	}
	var lines []string
	for _, c := range def.Columns {
		line, ok := p.pgColumn(def, c, &cr)
		if !ok {
			cr.Skipped = append(cr.Skipped, c.Name)
			continue
		}
		lines = append(lines, line)
		if c.Comment != "" {
			cr.After = append(cr.After, "COMMENT ON COLUMN "+tbl+"."+p.Quote(c.Name)+" IS "+quoteLiteral(c.Comment))
		}
	}
	lines = append(lines, p.Quote(fence)+" bigint NOT NULL DEFAULT 0")
	if pk := def.PrimaryKey; pk != nil {
		if cols, ok := p.plainColumns(*pk, def, &cr); ok {
			s := "PRIMARY KEY (" + p.quoteList(cols) + ")"
			if same && pk.Name != "" {
				s = "CONSTRAINT " + p.Quote(pk.Name) + " " + s
			}
			lines = append(lines, s)
		}
	}
	for _, ck := range def.Checks {
		expr, err := translateExpr(ck.Expr, def.Engine, plans.Postgres)
		if err != nil {
			cr.Notes = append(cr.Notes, fmt.Sprintf("check %s (%s) not created: %v", ck.Name, ck.Expr, err))
			continue
		}
		s := "CHECK (" + expr + ")"
		if ck.Name != "" {
			s = "CONSTRAINT " + p.Quote(pgName(ck.Name)) + " " + s
		}
		lines = append(lines, s)
	}
	if !same {
		lines = append(lines, p.enumChecks(def, cr.Skipped)...)
	}
	cr.Table = "CREATE TABLE " + tbl + " (\n  " + strings.Join(lines, ",\n  ") + "\n)"
	if same && def.PartitionBy != "" {
		cr.Table += " PARTITION BY " + def.PartitionBy
		for _, pt := range def.Partitions {
			name := sibling(def.Name, pt.Name[len(pt.Name)-1])
			cr.After = append(cr.After, "CREATE TABLE IF NOT EXISTS "+p.Quote(name...)+" PARTITION OF "+tbl+" "+pt.Bound)
		}
	}
	if !same && def.PartitionBy != "" {
		clause, _, _ := strings.Cut(def.PartitionBy, "\n")
		cr.Notes = append(cr.Notes, fmt.Sprintf("partitioned table (%s): created as a plain table", strings.TrimSpace(clause)))
	}
	if def.Comment != "" {
		cr.After = append(cr.After, "COMMENT ON TABLE "+tbl+" IS "+quoteLiteral(def.Comment))
	}
	for _, x := range def.Indexes {
		if st, ok := p.indexStep(def, x, &cr); ok {
			cr.Indexes = append(cr.Indexes, st)
		}
	}
	cr.ForeignKeys = p.ForeignKeySteps(def)
	if same && def.PartitionBy != "" {
		p.partitionSteps(def, &cr)
	}
	return cr
}

// partitionSteps add the post-load steps creating what def's partitions
// declare on their own (not from the parent's): their primary key,
// indexes and foreign keys, named <partition>.<name> among the steps (a
// constraint's name is per table).
func (p Postgres) partitionSteps(def *TableDef, cr *Created) {
	for _, pt := range def.Partitions {
		part := *def
		part.Name = sibling(def.Name, pt.Name[len(pt.Name)-1])
		part.PartitionBy, part.Partitions, part.ForeignKeys = "", nil, pt.ForeignKeys
		label := func(st Step) Step {
			st.Name = part.Name[len(part.Name)-1] + "." + st.Name
			return st
		}
		if pk := pt.PrimaryKey; pk != nil {
			if cols, ok := p.plainColumns(*pk, &part, cr); ok {
				tbl := p.Quote(part.Name...)
				cr.Indexes = append(cr.Indexes, label(Step{Kind: StepIndex, Table: part.Name, Name: pgName(pk.Name),
					SQL:        "ALTER TABLE " + tbl + " ADD CONSTRAINT " + p.Quote(pgName(pk.Name)) + " PRIMARY KEY (" + p.quoteList(cols) + ")",
					Exists:     `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conrelid = $1::regclass AND conname = $2)`,
					ExistsArgs: []any{tbl, pgName(pk.Name)}}))
			}
		}
		for _, x := range pt.Indexes {
			if st, ok := p.indexStep(&part, x, cr); ok {
				cr.Indexes = append(cr.Indexes, label(st))
			}
		}
		for _, st := range p.ForeignKeySteps(&part) {
			cr.ForeignKeys = append(cr.ForeignKeys, label(st))
		}
	}
}

// pgColumn is a column's line of the CREATE TABLE, or false when the
// column cannot be created (noted). A serial column's sequence goes to
// Before and its ownership to After.
func (p Postgres) pgColumn(def *TableDef, c ColumnDef, cr *Created) (string, bool) {
	same := def.Engine == plans.Postgres
	s := p.Quote(c.Name) + " " + c.Type
	switch {
	case c.Generated != "":
		expr, err := translateExpr(c.Generated, def.Engine, plans.Postgres)
		if err != nil {
			cr.Notes = append(cr.Notes, fmt.Sprintf("generated column %s (%s) not created, nor copied: %v", c.Name, c.Generated, err))
			return "", false
		}
		if !c.Stored {
			cr.Notes = append(cr.Notes, fmt.Sprintf("generated column %s: virtual in the source, stored here (PostgreSQL has no virtual columns)", c.Name))
		}
		s += " GENERATED ALWAYS AS (" + expr + ") STORED"
	case c.Identity == IdentityAlways:
		s += " GENERATED ALWAYS AS IDENTITY"
	case !same && c.Identity != "" && !typemap.IntegerType(c.Type):
		cr.Notes = append(cr.Notes, fmt.Sprintf("column %s: AUTO_INCREMENT not reproduced, an identity is an integer type and the plan names %s", c.Name, c.Type))
	case c.Identity == IdentityByDefault || c.Identity == AutoIncrement:
		s += " GENERATED BY DEFAULT AS IDENTITY"
	case c.Identity == IdentitySerial:
		seq := serialSeq(def.Name, c.Name)
		create := "CREATE SEQUENCE IF NOT EXISTS " + p.Quote(seq...)
		if t := strings.ToLower(c.Type); t == "integer" || t == "smallint" {
			create += " AS " + t
		}
		cr.Before = append(cr.Before, create)
		s += " DEFAULT nextval(" + quoteLiteral(p.Quote(seq...)) + "::regclass)"
		cr.After = append(cr.After, "ALTER SEQUENCE "+p.Quote(seq...)+" OWNED BY "+p.Quote(def.Name...)+"."+p.Quote(c.Name))
	case same && c.Default.Kind != DefaultNone:
		s += " DEFAULT " + p.sequencesRenamed(def, c.Default.Expr)
	case c.Default.Kind != DefaultNone:
		if d, ok := p.crossDefault(c, cr); ok {
			s += " DEFAULT " + d
		}
	}
	if !same && (c.OnUpdate != "" || strings.Contains(strings.ToLower(c.Default.Expr), "on update")) {
		on := c.OnUpdate
		if on == "" {
			on = c.Default.Expr
		}
		cr.Notes = append(cr.Notes, fmt.Sprintf("column %s: ON UPDATE %s is not reproduced (PostgreSQL needs a trigger for it)", c.Name, on))
	}
	if !same && c.Values != nil && strings.HasPrefix(strings.ToLower(c.Type), "set") {
		cr.Notes = append(cr.Notes, fmt.Sprintf("SET column %s: its members %v are not checked here", c.Name, c.Values))
	}
	if c.NotNull {
		s += " NOT NULL"
	}
	return s, true
}

// createSequence creates seq when missing, as the source defines it.
func (p Postgres) createSequence(seq Sequence) string {
	s := "CREATE SEQUENCE IF NOT EXISTS " + p.Quote(seq.Name...)
	if seq.Type != "" {
		s += " AS " + seq.Type
	}
	s += fmt.Sprintf(" INCREMENT BY %d MINVALUE %d MAXVALUE %d START WITH %d CACHE %d", seq.Increment, seq.Min, seq.Max, seq.Start, max(seq.Cache, 1))
	if !seq.Cycle {
		s += " NO"
	}
	return s + " CYCLE"
}

// sequencesRenamed is a default expression with each sequence of def it
// names by the source's spelling (Sequence.Ref) named as created here.
func (p Postgres) sequencesRenamed(def *TableDef, expr string) string {
	for _, seq := range def.Sequences {
		if seq.Ref != "" {
			expr = strings.ReplaceAll(expr, pgRegclassConst(seq.Ref), pgRegclassConst(p.Quote(seq.Name...)))
		}
	}
	return expr
}

// crossDefault is a MySQL column's default for its (mapped) PostgreSQL
// type, or false (noted).
func (p Postgres) crossDefault(c ColumnDef, cr *Created) (string, bool) {
	d := c.Default
	if m := mysqlBitLiteral.FindStringSubmatch(strings.TrimSpace(d.Expr)); m != nil {
		return p.bitDefault(c, m[1], cr)
	}
	switch d.Kind {
	case DefaultNow:
		return "CURRENT_TIMESTAMP", true
	case DefaultLiteral:
		if err := typemap.CheckPGConstant(strings.ToLower(c.Base), d.Value); err != nil {
			cr.Notes = append(cr.Notes, fmt.Sprintf("column %s: default %s not created: %v", c.Name, quoteLiteral(d.Value), err))
			return "", false
		}
		switch base := strings.ToLower(c.Base); {
		case base == "boolean" || base == "bool":
			switch strings.ToLower(d.Value) {
			case "1", "true":
				return "true", true
			case "0", "false":
				return "false", true
			}
			cr.Notes = append(cr.Notes, fmt.Sprintf("column %s: default %q is no boolean", c.Name, d.Value))
			return "", false
		case pgNumber.MatchString(d.Value) && pgNumeric[base]:
			return d.Value, true
		}
		return quoteLiteral(d.Value), true
	}
	expr, err := translateExpr(d.Expr, plans.MySQL, plans.Postgres)
	if err != nil {
		cr.Notes = append(cr.Notes, fmt.Sprintf("column %s: default %s not created: %v", c.Name, d.Expr, err))
		return "", false
	}
	return expr, true
}

// mysqlBitLiteral is a MySQL bit-value literal, b'0101': a bit column's
// default as the catalog spells it.
var mysqlBitLiteral = regexp.MustCompile(`^[bB]'([01]{1,64})'$`)

// bitDefault is a MySQL bit column's default, its digits given, for the
// column's (named) PostgreSQL type, or false (noted): the number, the
// boolean or the bit string it stands for.
func (p Postgres) bitDefault(c ColumnDef, digits string, cr *Created) (string, bool) {
	n, _ := strconv.ParseUint(digits, 2, 64)
	digits = strconv.FormatUint(n, 2)
	noted := func(why string) (string, bool) {
		cr.Notes = append(cr.Notes, fmt.Sprintf("column %s: default %s not created: %s", c.Name, c.Default.Expr, why))
		return "", false
	}
	base := strings.ToLower(c.Base)
	width := 0
	if a := typeArgs(c.Type); len(a) == 1 {
		width, _ = strconv.Atoi(a[0])
	}
	switch {
	case base == "boolean" || base == "bool":
		if n > 1 {
			return noted("no boolean")
		}
		return strconv.FormatBool(n == 1), true
	case pgIntMax[base] > 0:
		if n > pgIntMax[base] {
			return noted("out of range for " + c.Type)
		}
		return strconv.FormatUint(n, 10), true
	case base == "numeric" || base == "decimal":
		return strconv.FormatUint(n, 10), true
	case base == "bit" || base == "bit varying" || base == "varbit":
		if base == "bit" && width == 0 {
			width = 1
		}
		if width > 0 && len(digits) > width {
			return noted("it does not fit " + c.Type)
		}
		return "B'" + strings.Repeat("0", max(width-len(digits), 0)) + digits + "'", true
	}
	return noted("no value of type " + c.Type)
}

// pgIntMax are the PostgreSQL integer types (mapped columns' spelling
// too) and their largest values.
var pgIntMax = map[string]uint64{"smallint": math.MaxInt16, "int2": math.MaxInt16, "integer": math.MaxInt32, "int": math.MaxInt32,
	"int4": math.MaxInt32, "bigint": math.MaxInt64, "int8": math.MaxInt64}

// pgNumeric are the numeric base types (mapped columns' spelling too).
var pgNumeric = map[string]bool{"smallint": true, "integer": true, "bigint": true, "numeric": true, "decimal": true,
	"real": true, "double precision": true, "int": true, "int2": true, "int4": true, "int8": true, "float4": true, "float8": true}

// enumChecks are the CHECKs of a MySQL table's ENUM columns, created as
// text: col IN (members).
func (p Postgres) enumChecks(def *TableDef, skipped []string) []string {
	var out []string
	table := def.Name[len(def.Name)-1]
	for _, c := range def.Columns {
		if c.Values == nil || strings.HasPrefix(strings.ToLower(c.Type), "set") || slices.Contains(skipped, c.Name) {
			continue
		}
		q := make([]string, len(c.Values))
		for i, v := range c.Values {
			q[i] = quoteLiteral(v)
		}
		out = append(out, "CONSTRAINT "+p.Quote(pgName(table+"_"+c.Name+"_check"))+" CHECK ("+p.Quote(c.Name)+" IN ("+strings.Join(q, ", ")+"))")
	}
	return out
}

// plainColumns are a key's columns, or false (noted) when a part is an
// expression or a prefix.
func (p Postgres) plainColumns(x Index, def *TableDef, cr *Created) ([]string, bool) {
	cols := x.Columns()
	for i, c := range cols {
		if c == "" {
			cr.Notes = append(cr.Notes, fmt.Sprintf("key %s not created: part %d is an expression", x.Name, i+1))
			return nil, false
		}
		if slices.Contains(cr.Skipped, c) {
			cr.Notes = append(cr.Notes, fmt.Sprintf("key %s not created: column %s is not created", x.Name, c))
			return nil, false
		}
	}
	return cols, true
}

// ForeignKeySteps implements Definitions.
func (p Postgres) ForeignKeySteps(def *TableDef) []Step {
	var out []Step
	tbl := p.Quote(def.Name...)
	for _, fk := range def.ForeignKeys {
		s := "ALTER TABLE " + tbl + " ADD CONSTRAINT " + p.Quote(pgName(fk.Name)) +
			" FOREIGN KEY (" + p.quoteList(fk.Columns) + ") REFERENCES " + p.Quote(fk.RefTable...) +
			" (" + p.quoteList(fk.RefColumns) + ")"
		if def.Engine == plans.Postgres && strings.Contains(fk.Def, " MATCH FULL") {
			s += " MATCH FULL"
		}
		s += " ON DELETE " + orNoAction(fk.OnDelete) + " ON UPDATE " + orNoAction(fk.OnUpdate)
		if def.Engine == plans.Postgres {
			switch {
			case strings.Contains(fk.Def, " INITIALLY DEFERRED"):
				s += " DEFERRABLE INITIALLY DEFERRED"
			case strings.Contains(fk.Def, " DEFERRABLE"):
				s += " DEFERRABLE"
			}
		}
		out = append(out, Step{Kind: StepForeignKey, Table: def.Name, Name: pgName(fk.Name), SQL: s,
			Exists:     `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conrelid = $1::regclass AND conname = $2)`,
			ExistsArgs: []any{tbl, pgName(fk.Name)}})
	}
	return out
}

// pgDo is a DO block of body, dollar-quoted by a tag body does not hold.
func pgDo(body string) string {
	tag := "$migrate$"
	for strings.Contains(body, tag) {
		tag = "$" + tag[1:len(tag)-1] + "_$"
	}
	return "DO " + tag + " " + body + " " + tag
}

func orNoAction(a string) string {
	if a == "" {
		return "NO ACTION"
	}
	return a
}

// DropForeignKey implements Definitions.
func (p Postgres) DropForeignKey(table []string, name string) string {
	return "ALTER TABLE " + p.Quote(table...) + " DROP CONSTRAINT IF EXISTS " + p.Quote(name)
}

// SequenceSteps implements Definitions: for each identity or serial
// column, and each whose default is nextval() of a sequence no column owns
// (ColumnDef.Sequence), a DO block raising its sequence so the next value
// is above the column's highest and at least the column's Next (the
// source's counter, which an emptied MySQL table keeps), by whole
// increments (and at least the sequence's minimum); never lowering it,
// nothing on an empty table without a Next nor for a descending sequence.
func (p Postgres) SequenceSteps(def *TableDef) []Step {
	var out []Step
	tbl := p.Quote(def.Name...)
	for _, c := range def.Columns {
		seq := `pg_get_serial_sequence(` + quoteLiteral(tbl) + `, ` + quoteLiteral(c.Name) + `)::regclass`
		switch c.Identity {
		case IdentityAlways, IdentityByDefault, IdentitySerial, AutoIncrement:
		default:
			if c.Sequence == nil {
				continue
			}
			seq = `to_regclass(` + quoteLiteral(p.Quote(c.Sequence...)) + `)`
		}
		highest := `max(` + p.Quote(c.Name) + `)`
		if c.Next > 1 {
			highest = `GREATEST(` + highest + `, ` + strconv.FormatInt(c.Next-1, 10) + `)` // as if the source's last value were there
		}
		body := `DECLARE s regclass := ` + seq + `; ` +
			`m numeric; v numeric; l numeric; called boolean; inc bigint; mn bigint; ` +
			`BEGIN SELECT ` + highest + ` INTO m FROM ` + tbl + `; ` +
			`IF s IS NULL OR m IS NULL THEN RETURN; END IF; ` +
			`EXECUTE 'SELECT last_value, is_called FROM ' || s::text INTO l, called; ` +
			`SELECT seqincrement, seqmin INTO inc, mn FROM pg_catalog.pg_sequence WHERE seqrelid = s; ` +
			`v := CASE WHEN called THEN l + inc ELSE l END; ` +
			`IF inc > 0 AND m + 1 > v THEN PERFORM setval(s, GREATEST(v + inc * ceil((m + 1 - v) / inc), mn)::bigint, false); END IF; END`
		out = append(out, Step{Kind: StepSequence, Table: def.Name, Name: c.Name, SQL: pgDo(body)})
	}
	return out
}
