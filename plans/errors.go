package plans

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every parse and validation error of
// this package: *Error, Errors and the errors of ParseDSN. The CLI maps it to
// exit code 2.
var ErrInvalid = errors.New("invalid plan")

// Error is one problem at one place: a line and column of a plan file, or
// the command line flags when File is "".
type Error struct {
	File string // plan file path; "" when the problem is in the flags
	Line int    // 1-based line; 0 when unknown or for flags
	Msg  string // never holds a password
	// Column is the 1-based column (in characters) on Line; 0 when unknown.
	// It is unknown for most YAML syntax errors: yaml.v3 reports only
	// their line, in the text of a plain error.
	Column int
}

// Error formats the problem as "file:line:column: msg", "file:line: msg"
// when the column is unknown, "file: msg" when the line is unknown too, or
// "flags: msg".
func (e *Error) Error() string {
	switch {
	case e.File == "":
		return "flags: " + e.Msg
	case e.Line <= 0:
		return e.File + ": " + e.Msg
	case e.Column <= 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	default:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
	}
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Errors is every problem found in a plan, sorted: flags first, then by line
// and column.
type Errors []*Error

// Error joins the problems with newlines.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is reports whether target is ErrInvalid.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the single problems, so errors.As can find an *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// pos is a place in the plan: a file, line and column (0 when unknown), or
// the flags (file "").
type pos struct {
	file string
	line int
	col  int
}

var flagsPos = pos{}

// place names a position within its file for a message: "line 6, column 5",
// or "line 6" when the column is unknown.
func (p pos) place() string {
	if p.col <= 0 {
		return "line " + strconv.Itoa(p.line)
	}
	return "line " + strconv.Itoa(p.line) + ", column " + strconv.Itoa(p.col)
}

// problem is an *Error tagged with the field it is about, so that a flag
// overriding the field can drop it.
type problem struct {
	field string // "name", "source", "tables.2.key", ...; "" = not droppable
	err   *Error
}

// problems collects every problem found.
type problems []problem

func (ps *problems) add(field string, at pos, format string, args ...any) {
	*ps = append(*ps, problem{field: field, err: &Error{File: at.file, Line: at.line, Column: at.col, Msg: fmt.Sprintf(format, args...)}})
}

// drop removes the problems about the given fields.
func (ps *problems) drop(fields map[string]bool) {
	kept := (*ps)[:0]
	for _, p := range *ps {
		if p.field == "" || !fields[p.field] {
			kept = append(kept, p)
		}
	}
	*ps = kept
}

// err returns the problems as sorted Errors, or nil when there are none.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	es := make(Errors, len(ps))
	for i, p := range ps {
		es[i] = p.err
	}
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if (a.File == "") != (b.File == "") {
			return a.File == ""
		}
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return es
}
