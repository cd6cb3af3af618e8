package plans

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The plan's notify: list (Plan.Notify, notify.go). Unlike a table's
// fields, nothing of a sink can be set by a flag, so a sink is checked
// where it is read: with the environment (secret_env) and the file system
// (ca_file) at hand, and the position and text as written of every field.

// The keys a sink may use; a webhook's are in decode_webhook.go.
var sinkKeys = []string{"name", "webhook", "command", "events", "timeout", "give_up_after"}

// maxSinkName bounds a sink's name: it labels metrics and delivery rows.
const maxSinkName = 64

// notify reads the notify: list into p.Notify, which stays nil when the
// list is null or empty.
func (d *decoder) notify(p *Plan, n *yaml.Node) {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return
	case n.Kind != yaml.SequenceNode:
		d.probs.add("notify", d.at(n), "notify must be a list of sinks (- name: ..., with a webhook: or a command:)")
		return
	}
	first := map[string]pos{}
	for i, item := range n.Content {
		item = resolve(item)
		s, f := d.sink(i, item)
		if f == nil {
			continue
		}
		if validSinkName(s.Name) && !f.bad["name"] {
			if at, dup := first[s.Name]; dup {
				d.probs.add(f.tag("name"), f.where("name"), "sink name %q is used twice (first at %s); each sink needs its own name", s.Name, at.place())
			} else {
				first[s.Name] = f.where("name")
			}
		}
		p.Notify = append(p.Notify, s)
	}
}

func validSinkName(s string) bool { return validName(s) && len(s) <= maxSinkName }

// sink reads and checks item i of notify:. It returns nil fields when the
// item is not a mapping.
func (d *decoder) sink(i int, item *yaml.Node) (Sink, *fields) {
	s := Sink{Timeout: DefaultSinkTimeout, GiveUpAfter: DefaultSinkGiveUpAfter, Line: item.Line, Column: item.Column}
	if item.Kind != yaml.MappingNode {
		d.probs.add("", d.at(item), "each sink in notify must be a mapping: a name, and a webhook or a command")
		return s, nil
	}
	f := newFields("notify."+strconv.Itoa(i)+".", d.at(item))
	nodes := map[string]*yaml.Node{}
	d.mapping(item, "sink", sinkKeys, func(key string, v *yaml.Node) { nodes[key] = v })

	// The name first, whatever the order in the file: it labels the
	// sink's other problems.
	label := "sink #" + strconv.Itoa(i+1) + ": "
	if v := nodes["name"]; v != nil {
		d.str(f, "name", v, &s.Name)
	}
	switch {
	case f.bad["name"]:
	case s.Name == "":
		d.probs.add(f.tag("name"), f.where("name"), "%s%s", label, f.missing("name"))
	case !validSinkName(s.Name):
		d.probs.add(f.tag("name"), f.where("name"), "%sname %s must match [a-z0-9_-]+ (at most %d characters)", label, f.show("name", s.Name), maxSinkName)
	default:
		label = "sink " + s.Name + ": "
	}

	hook, cmd := given(nodes["webhook"]), given(nodes["command"])
	if hook {
		s.Webhook = d.webhook(label, f, nodes["webhook"])
	}
	if cmd {
		s.Command = d.command(label, f, nodes["command"])
	}
	switch {
	case hook && cmd: // reported at the second one given
		later := keyNode(item, "command")
		if at := keyNode(item, "webhook"); at.Line > later.Line || at.Line == later.Line && at.Column > later.Column {
			later = at
		}
		d.probs.add("", d.at(later), "%sgive either webhook or command, not both", label)
	case !hook && !cmd:
		d.probs.add("", f.base, "%sgive a webhook or a command", label)
	}
	if v := nodes["events"]; v != nil {
		s.Events = d.events(label, f, v)
	}
	if v := nodes["timeout"]; v != nil {
		d.duration(f, "timeout", v, &s.Timeout)
		if f.has("timeout") && !f.bad["timeout"] && (s.Timeout < MinSinkTimeout || s.Timeout > MaxSinkTimeout) {
			d.probs.add(f.tag("timeout"), f.where("timeout"), "%stimeout %s is out of range %v..%s", label, shortDuration(s.Timeout), MinSinkTimeout, shortDuration(MaxSinkTimeout))
		}
	}
	if v := nodes["give_up_after"]; v != nil {
		d.duration(f, "give_up_after", v, &s.GiveUpAfter)
		if f.has("give_up_after") && !f.bad["give_up_after"] && s.GiveUpAfter < MinSinkGiveUpAfter {
			d.probs.add(f.tag("give_up_after"), f.where("give_up_after"), "%sgive_up_after %s is too short (at least %s)", label, shortDuration(s.GiveUpAfter), shortDuration(MinSinkGiveUpAfter))
		}
	}
	return s, f
}

// given reports whether a key's value says something: null counts as left
// out, as everywhere in a plan.
func given(v *yaml.Node) bool { return v != nil && !(v.Kind == yaml.ScalarNode && v.Tag == "!!null") }

// keyNode is the key node of key in mapping m (the first, when repeated).
func keyNode(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return k
		}
	}
	return m
}

// shortDuration writes whole minutes and hours as a plan would (10m, not
// 10m0s).
func shortDuration(t time.Duration) string {
	s := t.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// command reads a sink's command: the program and its arguments, run
// without a shell; one string is the program alone.
func (d *decoder) command(label string, f *fields, n *yaml.Node) *Command {
	argv := d.stringList(label, f, "command", "a list: the program and its arguments (no shell)", n)
	if argv == nil || f.bad["command"] {
		return nil
	}
	if len(argv) == 0 {
		d.probs.add(f.tag("command"), f.where("command"), "%scommand is empty: give the program to run and its arguments", label)
		return nil
	}
	ok := true
	for j, a := range argv {
		if a != "" {
			continue
		}
		ok = false
		what := fmt.Sprintf("argument %d", j)
		if j == 0 {
			what = "program"
		}
		d.probs.add(f.tag("command"), f.item("command", j), "%scommand's %s is empty", label, what)
	}
	if !ok {
		return nil
	}
	return &Command{Argv: argv}
}

// events reads a sink's events: event types and globs over them, each
// matching at least one type.
func (d *decoder) events(label string, f *fields, n *yaml.Node) []string {
	evs := d.stringList(label, f, "events", "a list of event types (shard.halted, \"shard.*\", ...)", n)
	if f.bad["events"] {
		return nil
	}
	if evs != nil && len(evs) == 0 {
		d.probs.add(f.tag("events"), f.where("events"), "%sevents is empty; leave it out to receive every event type", label)
	}
	for j, e := range evs {
		at, shown := f.item("events", j), f.showItem("events", j, e)
		switch {
		case slices.Contains(EventTypes, e):
		case !strings.ContainsAny(e, `*?[\`):
			hint := suggest(e, EventTypes)
			if hint == "" {
				hint = " (the types: " + strings.Join(EventTypes, ", ") + ")"
			}
			d.probs.add(f.tag("events"), at, "%sunknown event type %s%s", label, shown, hint)
		case !globMatchesEvent(e):
			if _, err := path.Match(e, ""); err != nil {
				d.probs.add(f.tag("events"), at, "%sevents pattern %s is not a glob (e.g. \"shard.*\")", label, shown)
			} else {
				d.probs.add(f.tag("events"), at, "%sevents pattern %s matches no event type (the types: %s)", label, shown, strings.Join(EventTypes, ", "))
			}
		}
	}
	return evs
}

func globMatchesEvent(pat string) bool {
	for _, t := range EventTypes {
		if ok, _ := path.Match(pat, t); ok {
			return true
		}
	}
	return false
}
