package plans

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// The keys a plan file may use.
var (
	planKeys  = []string{"name", "source", "target", "redis", "lease_ttl", "batch_size", "fence_column", "max_retries", "max_takeovers", "takeover_window", "max_outage", "tables"}
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
		d.probs.add("", d.at(root), "a plan must be a mapping of keys (name, source, target, redis, tables, ...)")
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
			d.dsn(f, key, v, &p.Redis)
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
		case "tables":
			d.tables(p, pp, v)
		}
	})
	return p, pp
}

// yamlLine finds the line in a yaml.v3 syntax error.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses the YAML and returns its root node, or nil after
// reporting why there is none.
func (d *decoder) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.probs.add("", pos{file: d.file}, "the plan file is empty")
		} else {
			d.yamlError(data, err)
		}
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.yamlError(data, err)
		return nil
	default:
		d.probs.add("", d.at(&next), "a plan file holds one YAML document; found another")
		return nil
	}
	if len(doc.Content) == 0 {
		d.probs.add("", pos{file: d.file}, "the plan file is empty")
		return nil
	}
	root := resolve(doc.Content[0])
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		d.probs.add("", d.at(root), "the plan file is empty")
		return nil
	}
	return root
}

// yamlError reports a YAML syntax error at its line. yaml.v3 numbers the
// lines of parser errors (but not scanner errors) from 0 and leaves out
// line 0; this undoes that.
//
// The column mostly stays unknown (0): yaml.v3 returns syntax errors as
// plain errors whose text holds only "line N" (its parser's marks, which
// have the column, are unexported), and guessing a column from the message
// would point at the wrong character as often as not. Two exceptions are
// found by reading the text itself: a tab in the indentation of the
// reported line, when the error is one a tab there causes (its column is
// the tab's), and an unknown anchor, which yaml.v3 reports without any
// position (its first use gives line and column).
func (d *decoder) yamlError(data []byte, err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line, col := 0, 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if isParserProblem(msg) {
		line++
	}
	if slices.Contains(tabProblems, msg) {
		if c := tabIndent(data, line); c > 0 {
			col = c
			if !strings.Contains(msg, "tab") {
				msg += " (the line is indented with a tab; YAML indents with spaces only)"
			}
		}
	}
	if name, ok := strings.CutPrefix(msg, "unknown anchor '"); ok && line == 0 {
		name, _, _ = strings.Cut(name, "'")
		for i, l := range bytes.Split(data, []byte("\n")) {
			if at := bytes.Index(l, []byte("*"+name)); at >= 0 {
				line, col = i+1, utf8.RuneCount(l[:at])+1
				break
			}
		}
	}
	d.probs.add("", pos{file: d.file, line: line, col: col}, "invalid YAML: %s", msg)
}

// tabProblems are the yaml.v3 scanner errors a tab in the indentation
// causes; the second is what a tab at the start of a line in block context
// gives.
var tabProblems = []string{
	"found a tab character that violates indentation",
	"found character that cannot start any token",
	"found a tab character where an indentation space is expected",
}

// tabIndent returns the 1-based column of the first tab in the indentation
// (leading spaces and tabs) of line n of data, or 0 when there is none.
func tabIndent(data []byte, n int) int {
	lines := bytes.Split(data, []byte("\n"))
	if n < 1 || n > len(lines) {
		return 0
	}
	for i, c := range lines[n-1] {
		switch c {
		case ' ':
		case '\t':
			return i + 1 // the indentation is ASCII: bytes are characters
		default:
			return 0
		}
	}
	return 0
}

func isParserProblem(msg string) bool {
	return strings.HasPrefix(msg, "did not find expected") ||
		slices.Contains([]string{"found undefined tag handle", "found incompatible YAML document", "found duplicate %YAML directive", "found duplicate %TAG directive"}, msg)
}

// resolve follows an alias to its anchored node, keeping the alias's line.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		c := *n.Alias
		c.Line, c.Column = n.Line, n.Column
		n = &c
	}
	return n
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

// expand replaces ${VAR} in a scalar's value with lookup(VAR). $${ is a
// literal ${; a bare $VAR is left alone. The result is not expanded again.
func (d *decoder) expand(tag, name string, n *yaml.Node) (string, bool) {
	s := n.Value
	if !strings.Contains(s, "${") {
		return s, true
	}
	var b strings.Builder
	ok := true
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				d.probs.add(tag, d.at(n), "%s: unterminated ${ (write $${ for a literal ${)", name)
				return "", false
			}
			v := s[i+2 : i+2+end]
			i += 2 + end + 1
			if !validVarName(v) {
				d.probs.add(tag, d.at(n), "%s: %q is not a variable name (want ${NAME}; write $${ for a literal ${)", name, v)
				ok = false
				continue
			}
			val, found := d.lookup(v)
			if !found {
				d.probs.add(tag, d.at(n), "%s: environment variable %s is not set", name, v)
				ok = false
				continue
			}
			b.WriteString(val)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), ok
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return true
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

// list reads a list of names; a single scalar is a list of one. dst stays
// nil for null, and is non-nil (maybe empty) when the list is given.
func (d *decoder) list(f *fields, name string, n *yaml.Node, dst *[]string) {
	f.at[name] = d.at(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if v, ok := d.scalar(f, name, n); ok {
			*dst = []string{v}
			f.items[name] = []pos{d.at(n)}
			f.iraw[name] = []string{n.Value}
		}
		return
	case yaml.SequenceNode:
	default:
		d.probs.add(f.tag(name), d.at(n), "%s must be a list of column names", name)
		f.bad[name] = true
		return
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
			d.probs.add(f.tag(name), d.at(item), "%s must be a list of column names", name)
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
	*dst = out
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
			d.probs.add("", d.at(item), "each table must be a mapping with at least name and key")
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
				d.int(tf, key, v, &t.Shards)
			case "types":
				d.types(tf, key, v, &t.Types)
			}
		})
		p.Tables = append(p.Tables, t)
	}
}

// suggest returns ` (did you mean "x"?)` for the known key closest to key,
// or "" when none is close.
func suggest(key string, known []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	best, bestDist := "", 2 // at most 1 edit for short words, 2 for longer
	if len(key) > 4 {
		bestDist = 3
	}
	for _, k := range known {
		if d := editDistance(norm(key), norm(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + strconv.Quote(best) + "?)"
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
