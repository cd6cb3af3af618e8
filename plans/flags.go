package plans

import (
	"slices"
	"strings"
	"time"
)

// Overrides are the command line flags. Non-zero fields override the plan
// file; without a file they build the plan-less, one-table form.
type Overrides struct {
	Name   string // plan name
	Source string // source DSN
	Target string // target DSN
	Redis  string // Redis DSN: the lock service, as --lock redis://…
	Lock   string // lock service: a DSN, or "db" for the target database

	// Table selects one table of the plan by source or target name (the
	// plan is narrowed to it); in the plan-less form it is the table to copy.
	Table       string
	TargetTable string // target table name of the selected table
	Key         string // comma-separated key columns of the selected table
	Columns     string // comma-separated columns of the selected table (optional)
	Shards      int    // shards of the selected table
	// Include and Exclude are comma-separated glob patterns: they turn
	// discovery on (Plan.Discover) and narrow it.
	Include, Exclude string

	BatchSize int           // rows per batch
	LeaseTTL  time.Duration // lease time to live
}

// FromFlags builds the plan-less form: one table, everything from flags,
// or with Include or Exclude and no table every table found. Source and
// target are required (the leases default to the target database); the name defaults to a slug of the table name
// ("public.orders" gives "public-orders") or of the include patterns.
func FromFlags(o Overrides) (*Plan, error) {
	p := withDefaults()
	pp := &planPos{fields: newFields("", flagsPos)}
	if o.Name == "" {
		o.Name = slug(o.Table)
		if o.Table == "" && (o.Include != "" || o.Exclude != "") {
			o.Name = slug("all " + o.Include)
		}
	}
	_, ps := apply(p, pp, o)
	ps = append(ps, validate(p, pp)...)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// Apply overrides the plan's values with the non-zero flags and validates
// the result. With Table set, the plan is narrowed to that table. On error
// p is left unchanged.
func (p *Plan) Apply(o Overrides) error {
	q := p.clone()
	pp := positionsOf(q)
	_, ps := apply(q, pp, o)
	ps = append(ps, validate(q, pp)...)
	if err := ps.err(); err != nil {
		return err
	}
	*p = *q
	return nil
}

func (p *Plan) clone() *Plan {
	q := *p
	q.Tables = make([]Table, len(p.Tables))
	for i, t := range p.Tables {
		t.Key = slices.Clone(t.Key)
		t.Columns = slices.Clone(t.Columns)
		q.Tables[i] = t
	}
	return &q
}

// apply sets the flags o on p, records their positions in pp, and returns
// the problem tags of the fields it replaced and the problems of the flags.
func apply(p *Plan, pp *planPos, o Overrides) (map[string]bool, problems) {
	var ps problems
	done := map[string]bool{}
	f := pp.fields
	set := func(tf *fields, name string) {
		tf.override(name)
		done[tf.tag(name)] = true
	}
	if o.Name != "" {
		p.Name = o.Name
		set(f, "name")
	}
	conflict := o.Lock != "" && o.Redis != ""
	switch {
	case conflict:
		ps.add("", flagsPos, "give --lock or --redis, not both (--redis URL is --lock URL)")
	case strings.EqualFold(strings.TrimSpace(o.Lock), LockDB):
		p.Lock, p.lockDB = DSN{}, true
		set(f, "lock")
		delete(f.at, "redis")
	case o.Lock != "" || o.Redis != "":
		p.lockDB = false
		delete(f.at, map[bool]string{true: "redis", false: "lock"}[o.Lock != ""])
	}
	if o.Lock != "" || o.Redis != "" { // the flag stands for both keys of the file
		done[f.tag("lock")], done[f.tag("redis")] = true, true
	}
	for _, x := range []struct {
		name, val string
		dst       *DSN
	}{{"source", o.Source, &p.Source}, {"target", o.Target, &p.Target}, {"redis", o.Redis, &p.Lock}, {"lock", o.Lock, &p.Lock}} {
		if x.val == "" || x.name == "lock" && p.lockDB || conflict && x.dst == &p.Lock {
			continue
		}
		set(f, x.name)
		d, err := ParseDSN(x.val)
		if err != nil {
			ps.add("", flagsPos, "%s: %v", x.name, err)
			f.bad[x.name] = true
			continue
		}
		*x.dst = d
	}
	if o.BatchSize != 0 {
		p.BatchSize = o.BatchSize
		set(f, "batch_size")
	}
	if o.LeaseTTL != 0 {
		p.LeaseTTL = o.LeaseTTL
		set(f, "lease_ttl")
	}
	if o.Include != "" {
		p.Include, p.Discover = splitList(o.Include), true
		set(f, "include")
	}
	if o.Exclude != "" {
		p.Exclude, p.Discover = splitList(o.Exclude), true
		set(f, "exclude")
	}

	i, ok := pickTable(p, pp, o, &ps)
	if ok {
		p.Tables = []Table{p.Tables[i]}
		pp.tables = []*fields{pp.tables[i]}
		t, tf := &p.Tables[0], pp.tables[0]
		if o.TargetTable != "" {
			t.Target = o.TargetTable
			set(tf, "target")
		}
		if o.Key != "" {
			t.Key = splitList(o.Key)
			set(tf, "key")
		}
		if o.Columns != "" {
			t.Columns = splitList(o.Columns)
			set(tf, "columns")
		}
		if o.Shards != 0 {
			t.Shards = o.Shards
			set(tf, "shards")
		}
	}
	fillDefaults(p, pp)
	return done, ps
}

// pickTable finds the table the table flags apply to, adding it when the
// plan has no tables yet. ok is false when no table flag is set or the
// table cannot be chosen (a problem is added).
func pickTable(p *Plan, pp *planPos, o Overrides, ps *problems) (int, bool) {
	tableFlags := o.TargetTable != "" || o.Key != "" || o.Columns != "" || o.Shards != 0
	switch {
	case o.Table != "":
		m := p.find(o.Table)
		switch {
		case len(m) == 1:
			return m[0], true
		case len(m) > 1:
			ps.add("", flagsPos, "table %q matches %d tables of the plan; name it by its target table", o.Table, len(m))
			return 0, false
		case len(p.Tables) > 0:
			ps.add("", flagsPos, "table %q is not in the plan (it has %s)", o.Table, tableNames(p, pp))
			return 0, false
		}
		tf := newFields(tablePrefix(0), flagsPos)
		tf.at["name"] = flagsPos
		p.Tables = []Table{{Name: o.Table, Shards: DefaultShards}}
		pp.tables = []*fields{tf}
		return 0, true
	case !tableFlags:
		return 0, false
	case len(p.Tables) == 1 && len(pp.tables) == 1:
		return 0, true
	case len(p.Tables) == 0:
		// validation reports the missing table
	default:
		ps.add("", flagsPos, "table is required to choose which of the plan's %d tables key, columns, shards or target table apply to", len(p.Tables))
	}
	return 0, false
}

// tableNames lists the plan's tables for a message, as written in the file.
func tableNames(p *Plan, pp *planPos) string {
	names := make([]string, 0, len(p.Tables))
	for i, t := range p.Tables {
		if t.Name != "" && i < len(pp.tables) {
			names = append(names, pp.tables[i].show("name", t.Name))
		}
	}
	if len(names) > 10 {
		names = append(names[:10], "...")
	}
	return strings.Join(names, ", ")
}

// splitList splits a comma-separated flag value, trimming spaces. Empty
// items are kept so validation can report them.
func splitList(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// slug makes a plan name from a table name: lower case, runs of other
// characters than [a-z0-9_] become one '-'.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '_' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
