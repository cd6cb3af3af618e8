package plans

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

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
