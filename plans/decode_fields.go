package plans

import (
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// scalar reads a scalar field and expands ${VAR}. ok is false when the
// value is null (the field counts as given but empty) or could not be read
// (reported, and the field marked bad).
func (d *decoder) scalar(f *fields, name string, n *yaml.Node) (string, bool) {
	f.at[name] = d.at(n)
	if n.Kind != yaml.ScalarNode {
		d.probs.add(f.tag(name), d.at(n), "%s must be a single value, not a %s", name, kindName(n))
		f.bad[name] = true
		return "", false
	}
	if n.Tag == "!!null" {
		f.null[name] = true
		return "", false
	}
	f.raw[name] = n.Value
	val, ok := d.expand(f.tag(name), name, n)
	if !ok {
		f.bad[name] = true
	}
	return val, ok
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	default:
		return "scalar"
	}
}

func (d *decoder) str(f *fields, name string, n *yaml.Node, dst *string) {
	if v, ok := d.scalar(f, name, n); ok {
		*dst = v
	}
}

func (d *decoder) int(f *fields, name string, n *yaml.Node, dst *int) {
	v, ok := d.scalar(f, name, n)
	if !ok {
		return
	}
	i, err := strconv.Atoi(v)
	if err != nil {
		d.probs.add(f.tag(name), d.at(n), "%s %s is not a whole number", name, f.show(name, v))
		f.bad[name] = true
		return
	}
	*dst = i
}

func (d *decoder) duration(f *fields, name string, n *yaml.Node, dst *time.Duration) {
	v, ok := d.scalar(f, name, n)
	if !ok {
		return
	}
	t, err := time.ParseDuration(v)
	if err != nil {
		d.probs.add(f.tag(name), d.at(n), "%s %s is not a duration (want a number with a unit, like 30s or 1m30s)", name, f.show(name, v))
		f.bad[name] = true
		return
	}
	*dst = t
}

func (d *decoder) dsn(f *fields, name string, n *yaml.Node, dst *DSN) {
	v, ok := d.scalar(f, name, n)
	if !ok || strings.TrimSpace(v) == "" {
		return // null or empty: validation says it is missing
	}
	dsn, err := ParseDSN(v)
	if err != nil {
		d.probs.add(f.tag(name), d.at(n), "%s: %v", name, err)
		f.bad[name] = true
		return
	}
	*dst = dsn
}

// lock reads the lock service: "db" (the target database) or a DSN.
func (d *decoder) lock(f *fields, name string, n *yaml.Node, p *Plan) {
	v, ok := d.scalar(f, name, n)
	if !ok || strings.TrimSpace(v) == "" {
		return // null or empty: validation says it is missing
	}
	if strings.EqualFold(strings.TrimSpace(v), LockDB) {
		p.Lock, p.lockDB = DSN{}, true
		return
	}
	d.dsn(f, name, n, &p.Lock)
}

// list reads a list of names; a single scalar is a list of one. dst stays
// nil for null, and is non-nil (maybe empty) when the list is given.
func (d *decoder) list(f *fields, name string, n *yaml.Node, dst *[]string) {
	if v := d.stringList("", f, name, "a list of column names", n); v != nil {
		*dst = v
	}
}

// stringList reads a list of strings, ${VAR} expanded; a single scalar is a
// list of one. It returns nil for null and for a value that is not a list
// (reported), and a non-nil list otherwise: without the items it could not
// read (reported, and the field marked bad).
func (d *decoder) stringList(label string, f *fields, name, want string, n *yaml.Node) []string {
	f.at[name] = d.at(n)
	var items []*yaml.Node
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		f.null[name] = true
		return nil
	case n.Kind == yaml.ScalarNode:
		items = []*yaml.Node{n}
	case n.Kind == yaml.SequenceNode:
		items = n.Content
	default:
		d.probs.add(f.tag(name), d.at(n), "%s%s must be %s", label, name, want)
		f.bad[name] = true
		return nil
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
			d.probs.add(f.tag(name), d.at(item), "%s%s must be %s", label, name, want)
			f.bad[name] = true
			continue
		}
		v, ok := d.expand(f.tag(name), name, item)
		if !ok {
			f.bad[name] = true
			continue
		}
		out = append(out, v)
		f.items[name] = append(f.items[name], d.at(item))
		f.iraw[name] = append(f.iraw[name], item.Value)
	}
	return out
}

// types reads a mapping of column name to target type text.
func (d *decoder) types(f *fields, name string, n *yaml.Node, dst *map[string]string) {
	f.at[name] = d.at(n)
	if n.Kind != yaml.MappingNode {
		d.probs.add(f.tag(name), d.at(n), "%s must map column names to target types, e.g. {amount: \"decimal(30,10)\"}", name)
		f.bad[name] = true
		return
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode || v.Tag == "!!null" || v.Value == "" {
			d.probs.add(f.tag(name), d.at(k), "%s must map column names to target types, e.g. {amount: \"decimal(30,10)\"}", name)
			f.bad[name] = true
			continue
		}
		if _, dup := out[k.Value]; dup {
			d.probs.add(f.tag(name), d.at(k), "column %q is given twice in %s", k.Value, name)
			f.bad[name] = true
			continue
		}
		typ, ok := d.expand(f.tag(name), name, v)
		if !ok {
			f.bad[name] = true
			continue
		}
		out[k.Value] = typ
	}
	*dst = out
}
