package plans

import (
	"slices"

	"go.yaml.in/yaml/v3"
)

// Decoding a plan file: the document's structure here; YAML syntax errors
// and their positions in decode_yaml.go, the typed field readers in
// decode_fields.go, ${VAR} expansion in decode_expand.go, "did you mean"
// in decode_suggest.go, the notify: list in decode_notify.go.

// The keys a plan file may use.
var (
	planKeys  = []string{"name", "source", "target", "redis", "lock", "lease_ttl", "batch_size", "fence_column", "max_retries", "max_takeovers", "takeover_window", "max_outage", "max_retained_log_mb", "include", "exclude", "tables", "notify"}
	tableKeys = []string{"name", "target", "key", "columns", "shards", "types"}
)

// decoder turns a YAML document into a Plan, recording positions and
// collecting every problem.
type decoder struct {
	file   string
	lookup func(string) (string, bool)
	probs  problems
}

func (d *decoder) at(n *yaml.Node) pos { return pos{file: d.file, line: n.Line, col: n.Column} }

// decode reads the document. It returns a nil plan when the document is
// unusable as a whole (syntax error, not a mapping).
func (d *decoder) decode(data []byte) (*Plan, *planPos) {
	root := d.document(data)
	if root == nil {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		d.probs.add("", d.at(root), "a plan must be a mapping of keys (name, source, target, lock, tables, ...)")
		return nil, nil
	}
	p := withDefaults()
	p.File = d.file
	pp := &planPos{fields: newFields("", d.at(root))}
	f := pp.fields
	d.mapping(root, "plan", planKeys, func(key string, v *yaml.Node) {
		switch key {
		case "name":
			d.str(f, key, v, &p.Name)
		case "fence_column":
			d.str(f, key, v, &p.FenceColumn)
		case "source":
			d.dsn(f, key, v, &p.Source)
		case "target":
			d.dsn(f, key, v, &p.Target)
		case "redis":
			d.dsn(f, key, v, &p.Lock)
		case "lock":
			d.lock(f, key, v, p)
		case "lease_ttl":
			d.duration(f, key, v, &p.LeaseTTL)
		case "batch_size":
			d.int(f, key, v, &p.BatchSize)
		case "max_retries":
			d.int(f, key, v, &p.MaxRetries)
		case "max_takeovers":
			d.int(f, key, v, &p.MaxTakeovers)
		case "takeover_window":
			d.duration(f, key, v, &p.TakeoverWindow)
		case "max_outage":
			d.duration(f, key, v, &p.MaxOutage)
		case "max_retained_log_mb":
			d.int(f, key, v, &p.MaxRetainedLogMB)
		case "include":
			d.list(f, key, v, &p.Include)
		case "exclude":
			d.list(f, key, v, &p.Exclude)
		case "tables":
			d.tables(p, pp, v)
		case "notify":
			d.notify(p, v)
		}
	})
	p.Discover = !f.has("tables") || p.Include != nil || p.Exclude != nil
	return p, pp
}

// mapping calls fn for each known key of m and reports unknown, duplicate
// and non-scalar keys.
func (d *decoder) mapping(m *yaml.Node, where string, known []string, fn func(key string, v *yaml.Node)) {
	seen := map[string]pos{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := resolve(m.Content[i]), resolve(m.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.probs.add("", d.at(k), "keys in %s must be plain words", where)
			continue
		}
		key := k.Value
		switch first, dup := seen[key]; {
		case key == "<<":
			d.probs.add("", d.at(k), "merge keys (<<) are not supported in %s", where)
		case dup:
			d.probs.add("", d.at(k), "duplicate key %q in %s (first at %s)", key, where, first.place())
		case !slices.Contains(known, key):
			d.probs.add("", d.at(k), "unknown key %q in %s%s", key, where, suggest(key, known))
		default:
			seen[key] = d.at(k)
			fn(key, v)
		}
	}
}

func (d *decoder) tables(p *Plan, pp *planPos, n *yaml.Node) {
	pp.at["tables"] = d.at(n)
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		pp.null["tables"] = true
		return
	case n.Kind != yaml.SequenceNode:
		d.probs.add("tables", d.at(n), "tables must be a list of tables")
		pp.bad["tables"] = true
		return
	}
	for i, item := range n.Content {
		item = resolve(item)
		tf := newFields(tablePrefix(i), d.at(item))
		pp.tables = append(pp.tables, tf)
		t := Table{Shards: DefaultShards, Line: item.Line, Column: item.Column}
		if item.Kind != yaml.MappingNode {
			d.probs.add("", d.at(item), "each table must be a mapping with at least a name")
			tf.broken = true
			p.Tables = append(p.Tables, t)
			continue
		}
		d.mapping(item, "table", tableKeys, func(key string, v *yaml.Node) {
			switch key {
			case "name":
				d.str(tf, key, v, &t.Name)
			case "target":
				d.str(tf, key, v, &t.Target)
			case "key":
				d.list(tf, key, v, &t.Key)
			case "columns":
				d.list(tf, key, v, &t.Columns)
			case "shards":
				if v.Kind == yaml.ScalarNode && v.Value == "auto" {
					t.Shards = ShardsAuto
					break
				}
				d.int(tf, key, v, &t.Shards)
				if t.Shards == ShardsAuto {
					t.Shards = shardsZero // a written 0 is not auto: out of range
				}
			case "types":
				d.types(tf, key, v, &t.Types)
			}
		})
		p.Tables = append(p.Tables, t)
	}
}
