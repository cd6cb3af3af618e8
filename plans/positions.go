package plans

import "strconv"

// fields records where the fields of a plan or of one table came from, so
// validation can point at the right line and quote the text as written.
type fields struct {
	prefix string              // problem tag prefix: "" for the plan, "tables.N." for a table
	base   pos                 // the plan or table as a whole
	at     map[string]pos      // field -> where it was set
	raw    map[string]string   // field -> text in the file before ${VAR} expansion
	items  map[string][]pos    // list field -> where each item was set
	iraw   map[string][]string // list field -> each item's text before expansion
	null   map[string]bool     // field given as null (treated as left out)
	bad    map[string]bool     // field whose value could not be read (already reported)
	broken bool                // the table entry itself could not be read
}

func newFields(prefix string, base pos) *fields {
	return &fields{
		prefix: prefix,
		base:   base,
		at:     map[string]pos{},
		raw:    map[string]string{},
		items:  map[string][]pos{},
		iraw:   map[string][]string{},
		null:   map[string]bool{},
		bad:    map[string]bool{},
	}
}

// tag is the problem tag of a field.
func (f *fields) tag(name string) string { return f.prefix + name }

// has reports whether the field was given a value (possibly empty, not null).
func (f *fields) has(name string) bool {
	_, ok := f.at[name]
	return ok && !f.null[name]
}

// where is the place of a field, or of the whole plan or table when the
// field was not given.
func (f *fields) where(name string) pos {
	if p, ok := f.at[name]; ok {
		return p
	}
	return f.base
}

// item is the place of item i of a list field.
func (f *fields) item(name string, i int) pos {
	if ps := f.items[name]; i < len(ps) {
		return ps[i]
	}
	return f.where(name)
}

// override records that a flag set the field.
func (f *fields) override(name string) {
	f.at[name] = flagsPos
	delete(f.raw, name)
	delete(f.items, name)
	delete(f.iraw, name)
	delete(f.bad, name)
	delete(f.null, name)
}

// show quotes a field's value for a message: the text as written in the
// file when ${VAR} expansion changed it, so a value taken from the
// environment never reaches an error message.
func (f *fields) show(name, val string) string {
	if raw, ok := f.raw[name]; ok && raw != val {
		return strconv.Quote(raw) + " (after expansion)"
	}
	return strconv.Quote(val)
}

// showItem quotes item i of a list field like show.
func (f *fields) showItem(name string, i int, val string) string {
	if raws := f.iraw[name]; i < len(raws) && raws[i] != val {
		return strconv.Quote(raws[i]) + " (after expansion)"
	}
	return strconv.Quote(val)
}

// missing says that a required field is absent or empty.
func (f *fields) missing(name string) string {
	raw, ok := f.raw[name]
	switch {
	case !f.has(name):
		return name + " is required"
	case ok && raw != "":
		return name + " is empty after expanding " + strconv.Quote(raw)
	default:
		return name + " is empty"
	}
}

// planPos is where a plan's fields and tables came from.
type planPos struct {
	*fields
	tables []*fields
}

func tablePrefix(i int) string { return "tables." + strconv.Itoa(i) + "." }

// positionsOf makes positions for a plan that was already built: fields sit
// in the plan's file (line unknown), tables at their lines and columns.
func positionsOf(p *Plan) *planPos {
	base := pos{file: p.File}
	pp := &planPos{fields: newFields("", base)}
	if !p.Lock.IsZero() || p.lockDB {
		pp.at["lock"] = base
	}
	for _, name := range []string{"name", "source", "target", "lease_ttl", "batch_size", "fence_column", "max_retries", "max_takeovers", "takeover_window", "max_outage", "max_retained_log_mb", "tables"} {
		pp.at[name] = base
	}
	for i, t := range p.Tables {
		tb := pos{file: p.File, line: t.Line, col: t.Column}
		if p.File == "" {
			tb = flagsPos
		}
		tf := newFields(tablePrefix(i), tb)
		for _, name := range []string{"name", "target", "key", "columns", "shards", "types"} {
			tf.at[name] = tb
		}
		pp.tables = append(pp.tables, tf)
	}
	return pp
}
