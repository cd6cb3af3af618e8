package plans

import (
	"errors"
	"testing"
)

func TestError_Error(t *testing.T) {
	tests := []struct {
		err  Error
		want string
	}{
		{Error{File: "plan.yaml", Line: 5, Column: 12, Msg: "m"}, "plan.yaml:5:12: m"},
		{Error{File: "plan.yaml", Line: 5, Msg: "m"}, "plan.yaml:5: m"}, // YAML syntax errors: column unknown
		{Error{File: "plan.yaml", Msg: "m"}, "plan.yaml: m"},
		{Error{File: "plan.yaml", Column: 3, Msg: "m"}, "plan.yaml: m"}, // a column without a line says nothing
		{Error{Line: 5, Column: 3, Msg: "m"}, "flags: m"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.err, got, tt.want)
		}
		if !errors.Is(&tt.err, ErrInvalid) {
			t.Errorf("%+v does not match ErrInvalid", tt.err)
		}
	}
}

func TestParse_errorPositions(t *testing.T) {
	// One problem per line, out of order within a line, and a syntax error
	// whose column yaml.v3 does not report.
	_, err := Parse("plan.yaml", []byte(header+"tables:\n  - {name: t, key: [id, id], colums: [id]}\n"), testLookup)
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 {
		t.Fatalf("error %v, want 2 problems", err)
	}
	if got := [2][2]int{{es[0].Line, es[0].Column}, {es[1].Line, es[1].Column}}; got != [2][2]int{{6, 25}, {6, 30}} {
		t.Errorf("positions %v, want 6:25 (the second id) then 6:30 (colums), though decoding found colums first\n%v", got, err)
	}

	_, err = Parse("plan.yaml", []byte(header+"tables: [{name: t, key: [id]}\n"), testLookup)
	var one *Error
	if !errors.As(err, &one) || one.Line != 5 || one.Column != 0 {
		t.Errorf("syntax error %+v, want line 5 and no column", one)
	}
}
