package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/typemap"
)

// Target is a target database being prepared for a plan whose source is
// of engine Source. Targets names the target table of every source table
// of the plan, by its catalog name joined ("public.orders"): a foreign key
// to a table the plan copies is re-pointed at its target, one to a table
// it does not copy is reported and left out.
type Target struct {
	SQL         dialect.Dialect
	Source      plans.Engine
	FenceColumn string
	Targets     map[string][]string
	// Recorded are the post-load steps the plan recorded, by target
	// table joined then the step's name: the unique indexes among them
	// are the plan's own, allowed beside the key on a MySQL target.
	Recorded map[string]map[string]bool
	// SourceDB, read with SourceSQL, is the source, for the collations of
	// its key columns (KeyCollations); nil: an existing target table's key
	// column that does not compare bytes is refused.
	SourceDB  Querier
	SourceSQL dialect.Catalog
}

// Prepared is what a target table needs before and after its data.
type Prepared struct {
	// Src and Dst are the copied columns, the source's and the target's
	// definitions, in the same order: every source column the plan
	// copies but those the target generates (or, when created, the
	// columns generated in the source).
	Src, Dst []dialect.Column
	Created  bool     // the table is missing: DDL creates it
	DDL      []string // statements before the data, in order
	// Steps are the post-load steps recorded for the table: a created
	// table's secondary indexes and foreign keys, an existing table's
	// foreign keys (dropped by DropFKs before the load).
	Steps   []dialect.Step
	DropFKs map[string]string // foreign key name -> the statement dropping it
	Notes   []string          // what of the source is not reproduced, and why
	// Def is the target table's definition: its own when it exists, as
	// it will be (in the target engine's terms) when created.
	Def *dialect.TableDef
}

// Prepare decides what the target table of t needs, changing nothing. src
// are the copied source columns (SourceColumns), def the source table's
// whole definition. When the table is missing: its creation from def
// (dialect.Definitions.Create) with the columns mapped to the target
// engine's types (C4), secondary indexes and foreign keys as post-load
// steps. When present: every copied column and a unique index on the key,
// an ALTER TABLE adding the fence column if it lacks it (only then: it
// would queue behind a running holder's batches), and its foreign keys as
// post-load steps, dropped before the load.
func (tg Target) Prepare(ctx context.Context, db Querier, t plans.Table, src []dialect.Column, def *dialect.TableDef) (*Prepared, error) {
	ident := t.TargetIdent()
	existing, err := Columns(ctx, db, tg.SQL, ident)
	if errors.Is(err, ErrNoTable) {
		return tg.create(t, src, def)
	}
	if err != nil {
		return nil, err
	}
	own, err := tg.SQL.ReadTable(ctx, db, ident)
	if err != nil {
		return nil, fmt.Errorf("target table %s: %w", t.Target, err)
	}
	p := &Prepared{DropFKs: map[string]string{}, Def: own}
	p.Src, p.Notes = Copied(src, def, own)
	if p.Dst, err = Align(existing, p.Src); err != nil {
		return nil, err
	}
	if err := tg.checkUniqueKey(own, t); err != nil {
		return nil, err
	}
	if err := typemap.Convertible(tg.Source, tg.SQL.Engine(), t.Name, p.Src, p.Dst); err != nil {
		return nil, fmt.Errorf("target table %s: %w", t.Target, err)
	}
	if err := tg.KeyCollations(ctx, db, t, p.Src); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(existing, func(c dialect.Column) bool { return c.Name == tg.FenceColumn }) {
		p.DDL = append(p.DDL, tg.SQL.AddFenceColumn(ident, tg.FenceColumn))
	}
	p.Steps = tg.SQL.ForeignKeySteps(own)
	for _, fk := range own.ForeignKeys {
		p.DropFKs[fk.Name] = tg.SQL.DropForeignKey(ident, fk.Name)
	}
	return p, nil
}

// Copied are the source columns src that a copy into an existing target
// table writes (dst its definition; def the source's): all but those the
// target generates itself, and those generated in the source that the
// target lacks. notes say which are left out.
func Copied(src []dialect.Column, def, dst *dialect.TableDef) (out []dialect.Column, notes []string) {
	generated, srcGenerated, has := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, c := range dst.Columns {
		generated[c.Name], has[c.Name] = c.Generated != "", true
	}
	for _, c := range def.Columns {
		srcGenerated[c.Name] = c.Generated != ""
	}
	for _, c := range src {
		switch {
		case generated[c.Name]:
			notes = append(notes, fmt.Sprintf("column %s is generated in the target table: not copied", c.Name))
		case srcGenerated[c.Name] && !has[c.Name]:
			notes = append(notes, fmt.Sprintf("column %s is generated in the source and not in the target table: not copied", c.Name))
		default:
			out = append(out, c)
		}
	}
	return out, notes
}

// Creation is what creating the target table of t takes (Prepare's
// answer when it is missing), found without reading either database: what
// `validate` checks and notes.
func (tg Target) Creation(t plans.Table, src []dialect.Column, def *dialect.TableDef) (*Prepared, error) {
	return tg.create(t, src, def)
}

// create is Prepare for a missing target table.
func (tg Target) create(t plans.Table, src []dialect.Column, def *dialect.TableDef) (*Prepared, error) {
	p := &Prepared{Created: true}
	d, notes := tg.targetDef(t, src, def)
	p.Notes = notes
	plain := make([]typemap.Column, len(d.Columns))
	for i, c := range d.Columns {
		plain[i] = c.Column
		plain[i].Sequenced = c.Identity != ""
	}
	mapped, err := typemap.MapColumns(tg.Source, tg.SQL.Engine(), t.Name, plain, t.Key, t.Types)
	if err != nil {
		return nil, err
	}
	byName := map[string]dialect.Column{}
	for i := range d.Columns {
		d.Columns[i].Column = mapped[i]
		byName[mapped[i].Name] = mapped[i]
	}
	c := tg.SQL.Create(d, tg.FenceColumn)
	p.Def = tg.asCreated(d)
	p.DDL = slices.Concat(c.Before, []string{c.Table}, c.After)
	p.Steps = slices.Concat(c.Indexes, c.ForeignKeys)
	p.Notes = append(p.Notes, c.Notes...)
	skipped := map[string]bool{}
	for _, s := range c.Skipped {
		skipped[s] = true
	}
	for _, col := range d.Columns {
		if col.Generated != "" && !skipped[col.Name] {
			skipped[col.Name] = true // created generated: written by the target itself
		}
	}
	for _, s := range src {
		if dst, ok := byName[s.Name]; ok && !skipped[s.Name] {
			p.Src, p.Dst = append(p.Src, s), append(p.Dst, dst)
		}
	}
	return p, nil
}

// asCreated is def as the target will describe the table it creates from
// it: its identity columns of the target engine's kind.
func (tg Target) asCreated(def *dialect.TableDef) *dialect.TableDef {
	d := *def
	d.Engine = tg.SQL.Engine()
	d.Columns = slices.Clone(def.Columns)
	for i, c := range d.Columns {
		switch {
		case d.Engine == plans.MySQL && tg.Source != plans.MySQL && dialect.SequenceKey(def, c):
			d.Columns[i].Identity = dialect.AutoIncrement // as MySQL.Create makes it
		case c.Identity == "" || d.Engine == tg.Source:
		case d.Engine == plans.MySQL:
			d.Columns[i].Identity = dialect.AutoIncrement
		default:
			d.Columns[i].Identity = dialect.IdentityByDefault
		}
	}
	return &d
}

// targetDef is the source's definition renamed and narrowed for the
// target: its name and its foreign keys' tables the target's, the columns
// the plan copies (plus, when it copies every column, the generated ones),
// the key as primary key (the source's own, when it differs, a unique
// index). What it leaves out is in notes.
func (tg Target) targetDef(t plans.Table, src []dialect.Column, def *dialect.TableDef) (*dialect.TableDef, []string) {
	var notes []string
	d := *def
	d.Name = t.TargetIdent()
	copied := map[string]bool{}
	for _, c := range src {
		copied[c.Name] = true
	}
	d.Columns = nil
	for _, c := range def.Columns {
		if c.Name == tg.FenceColumn {
			continue
		}
		if copied[c.Name] || c.Generated != "" && t.Columns == nil {
			d.Columns = append(d.Columns, c)
		}
	}
	has := func(cols []string) bool {
		for _, c := range cols {
			if c != "" && !slices.ContainsFunc(d.Columns, func(x dialect.ColumnDef) bool { return x.Name == c }) {
				return false
			}
		}
		return true
	}
	key := slices.Sorted(slices.Values(t.Key))
	d.Indexes = nil
	if def.PrimaryKey == nil || !slices.Equal(slices.Sorted(slices.Values(def.PrimaryKey.Columns())), key) {
		if def.PrimaryKey != nil && has(def.PrimaryKey.Columns()) {
			pk := *def.PrimaryKey
			pk.Unique, pk.Constraint = true, false
			d.Indexes = append(d.Indexes, pk) // the plan's key is the primary key
		}
		parts := make([]dialect.IndexPart, len(t.Key))
		for i, k := range t.Key {
			parts[i] = dialect.IndexPart{Column: k}
		}
		d.PrimaryKey = &dialect.Index{Unique: true, Constraint: true, Parts: parts}
	}
	for _, x := range def.Indexes {
		if has(x.Columns()) {
			d.Indexes = append(d.Indexes, x)
		} else {
			notes = append(notes, fmt.Sprintf("index %s: a column it uses is not copied", x.Name))
		}
	}
	fks := func(in []dialect.ForeignKey, of string) (out []dialect.ForeignKey) {
		for _, fk := range in {
			ref, ok := tg.Targets[strings.Join(fk.RefTable, ".")]
			switch {
			case !ok:
				notes = append(notes, fmt.Sprintf("foreign key %s%s references %s, which the plan does not copy: not created", fk.Name, of, strings.Join(fk.RefTable, ".")))
			case !has(fk.Columns):
				notes = append(notes, fmt.Sprintf("foreign key %s%s: a column it uses is not copied", fk.Name, of))
			default:
				fk.RefTable = ref
				out = append(out, fk)
			}
		}
		return out
	}
	d.Partitions = slices.Clone(def.Partitions)
	for i, pt := range d.Partitions {
		of := " of partition " + pt.Name[len(pt.Name)-1]
		if pt.PrimaryKey != nil && !has(pt.PrimaryKey.Columns()) {
			notes = append(notes, fmt.Sprintf("primary key %s%s: a column it uses is not copied", pt.PrimaryKey.Name, of))
			d.Partitions[i].PrimaryKey = nil
		}
		d.Partitions[i].Indexes = nil
		for _, x := range pt.Indexes {
			if has(x.Columns()) {
				d.Partitions[i].Indexes = append(d.Partitions[i].Indexes, x)
			} else {
				notes = append(notes, fmt.Sprintf("index %s%s: a column it uses is not copied", x.Name, of))
			}
		}
		d.Partitions[i].ForeignKeys = fks(pt.ForeignKeys, of)
	}
	renameOwned(def.Name, &d)
	d.ForeignKeys = fks(def.ForeignKeys, "")
	sequencesBeside(def.Name, &d)
	return &d, notes
}

// sequencesBeside moves the sequences of the source table's schema that
// its defaults use (dialect.TableDef.Sequences) to the target table's, as
// a serial column's own sequence is: those of other schemas keep theirs.
func sequencesBeside(src []string, d *dialect.TableDef) {
	if len(src) < 2 || len(d.Sequences) == 0 {
		return
	}
	d.Sequences = slices.Clone(d.Sequences)
	d.Columns = slices.Clone(d.Columns)
	for i, seq := range d.Sequences {
		if len(seq.Name) != 2 || seq.Name[0] != src[0] {
			continue
		}
		name := append(slices.Clone(d.Name[:len(d.Name)-1]), seq.Name[1])
		for j, c := range d.Columns {
			if slices.Equal(c.Sequence, seq.Name) {
				d.Columns[j].Sequence = name
			}
		}
		d.Sequences[i].Name = name
	}
}

// renameOwned renames what a table created under another name than its
// source's owns under a name of its own — its primary key's and indexes'
// names (one namespace per schema in PostgreSQL), its partitions — so they
// cannot meet the source's or another copy's: the source table's name as
// their prefix becomes the target's ("items_pkey" of items is
// "items_copy_pkey" of items_copy), else the target's name is put before
// them.
func renameOwned(src []string, d *dialect.TableDef) {
	from, to := src[len(src)-1], d.Name[len(d.Name)-1]
	if from == to {
		return
	}
	rename := func(name string) string {
		if name == "" {
			return ""
		}
		if rest, ok := strings.CutPrefix(name, from); ok {
			name = to + rest
		} else {
			name = to + "_" + name
		}
		if len(name) > 63 {
			name = name[:63]
		}
		return name
	}
	if d.PrimaryKey != nil {
		pk := *d.PrimaryKey
		pk.Name = rename(pk.Name)
		d.PrimaryKey = &pk
	}
	d.Indexes = slices.Clone(d.Indexes)
	for i := range d.Indexes {
		d.Indexes[i].Name = rename(d.Indexes[i].Name)
	}
	d.Partitions = slices.Clone(d.Partitions)
	for i, p := range d.Partitions {
		name := slices.Clone(d.Name)
		name[len(name)-1] = rename(p.Name[len(p.Name)-1])
		d.Partitions[i].Name = name
		if pk := p.PrimaryKey; pk != nil {
			x := *pk
			x.Name = rename(x.Name)
			d.Partitions[i].PrimaryKey = &x
		}
		d.Partitions[i].Indexes = slices.Clone(p.Indexes)
		for j := range p.Indexes {
			d.Partitions[i].Indexes[j].Name = rename(p.Indexes[j].Name)
		}
	}
}

// checkUniqueKey makes sure an existing target table has a unique index on
// exactly the business key, which the idempotent upsert needs — and no
// other, where the upsert matches any (a row could land on another row
// that shares only that index), but those the plan's post-load created.
func (tg Target) checkUniqueKey(own *dialect.TableDef, t plans.Table) error {
	want := slices.Sorted(slices.Values(t.Key))
	found := false
	uniq := slices.Clone(own.Indexes)
	if own.PrimaryKey != nil {
		uniq = append(uniq, *own.PrimaryKey)
	}
	for _, x := range uniq {
		cols := x.Columns()
		switch {
		case !x.Unique:
		case x.Where == "" && !slices.Contains(cols, "") && slices.Equal(slices.Sorted(slices.Values(cols)), want):
			found = true
		case tg.SQL.UpsertMatchesAnyUnique() && !tg.Recorded[t.Target][x.Name]:
			return fmt.Errorf("%w: target table %s has a unique index %s on %v besides the key %v; MySQL's upsert would update whichever row it matches (drop it for the load, or copy into a table migrate creates: it adds such indexes after the data)", plans.ErrInvalid, t.Target, x.Name, cols, t.Key)
		}
	}
	if !found {
		return fmt.Errorf("%w: target table %s has no unique index on exactly the key %v; the idempotent upsert needs one", plans.ErrInvalid, t.Target, t.Key)
	}
	return nil
}

// KeyCollations refuses an existing target table of t whose key column
// could make two distinct source keys one row: a collation that ignores
// case, accents or trailing spaces (MySQL's _ci, PAD SPACE _bin;
// PostgreSQL's nondeterministic ones) — unless the source, of the same
// engine, gives its key column the same collation, under which its keys
// are distinct already —, or a fixed-length character type (MySQL CHAR,
// PostgreSQL character(n)) where the source's key column keeps trailing
// spaces (src are the source's columns, by whose types it judges; nil:
// unknown, refused). The copy would write two source rows as one row and
// count both. A missing target table passes: migrate creates its text
// columns in a collation that compares bytes.
func (tg Target) KeyCollations(ctx context.Context, db Querier, t plans.Table, src []dialect.Column) error {
	ident := t.TargetIdent()
	cols, err := Columns(ctx, db, tg.SQL, ident)
	if errors.Is(err, ErrNoTable) {
		return nil
	}
	if err != nil {
		return err
	}
	dst, err := Collations(ctx, db, tg.SQL, ident)
	if err != nil {
		return fmt.Errorf("target table %s: collations: %w", t.Target, err)
	}
	var srcColl map[string]Collation
	for _, k := range t.Key {
		c, ok := dst[k]
		if !ok {
			continue
		}
		var why string
		switch {
		case !c.Bytewise:
			why = "has collation " + c.Name + ", under which distinct keys can be equal (case, accents or trailing spaces ignored), and the source (" + string(tg.Source) + ") does not compare its keys so"
			if tg.Source != tg.SQL.Engine() || tg.SourceDB == nil {
				break
			}
			if srcColl == nil {
				if srcColl, err = Collations(ctx, tg.SourceDB, tg.SourceSQL, t.SourceIdent()); err != nil {
					return fmt.Errorf("source table %s: collations: %w", t.Name, err)
				}
			}
			if srcColl[k] == c {
				continue
			}
			why = "has collation " + c.Name + ", under which distinct keys can be equal (case, accents or trailing spaces ignored), and the source's key column has " + collationText(srcColl[k])
		case c.Trims:
			s := colNamed(src, k)
			if s != nil && typemap.KindOf(s.Base) != typemap.Text {
				continue // no trailing space counts in the source either
			}
			why = "drops trailing spaces, which the source's key column keeps"
		default:
			continue
		}
		col := cols[slices.IndexFunc(cols, func(x dialect.Column) bool { return x.Name == k })]
		return fmt.Errorf("%w: target table %s: key column %s (%s) %s: two source rows would be written as one. Make the column compare bytes before the run, keeping the rest of its definition:\n  %s\nor let migrate create the table", plans.ErrInvalid, t.Target, k, col.Type, why, tg.SQL.BytewiseColumn(ident, col))
	}
	return nil
}

// colNamed is the column of cols named name, nil if none.
func colNamed(cols []dialect.Column, name string) *dialect.Column {
	if i := slices.IndexFunc(cols, func(c dialect.Column) bool { return c.Name == name }); i >= 0 {
		return &cols[i]
	}
	return nil
}

// collationText is a source column's collation as an error names it.
func collationText(c Collation) string {
	switch {
	case c.Name == "":
		return "no collation"
	case c.Trims:
		return "collation " + c.Name + ", in a type that drops trailing spaces"
	}
	return "collation " + c.Name
}

// StmtError names the statement that failed: DDL holds identifiers and
// types only, never a value.
func StmtError(what, stmt string, err error) error {
	return fmt.Errorf("%s: %w; the statement was:\n%s", what, err, stmt)
}
