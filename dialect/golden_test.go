package dialect

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// update rewrites the golden files from what the dialects produce now:
//
//	go test ./dialect/ -run TestGolden -update
var update = flag.Bool("update", false, "rewrite dialect/testdata/golden from the statements produced now")

// goldenEngine is one golden file: the statements of an engine's dialect,
// and of its variants where they differ.
type goldenEngine struct {
	file     string
	fixture  fixture
	primary  variant
	variants []variant // their sections appear only where they differ from primary's
}

type variant struct {
	name string
	d    Dialect
}

var goldenEngines = []goldenEngine{
	{file: "postgres.golden", fixture: pgFixture, primary: variant{"PostgreSQL", Postgres{}}},
	{file: "mysql.golden", fixture: myFixture, primary: variant{"MySQL 8.0.36", mysqlFor("8.0.36")},
		variants: []variant{
			{"MySQL 8.0.18", mysqlFor("8.0.18")},               // VALUES() instead of the row alias
			{"MariaDB 10.11", mysqlFor("10.11.6-MariaDB-log")}, // VALUES(), NO PAD collation, its own catalog
		}},
}

// section is one case's output in a golden file.
type section struct{ name, body string }

// TestGolden pins every statement of both engines: each case of
// goldenCases is run on each dialect and compared with its section in
// testdata/golden/ENGINE.golden.
func TestGolden(t *testing.T) {
	for _, e := range goldenEngines {
		t.Run(e.file, func(t *testing.T) {
			got := e.sections(t)
			path := filepath.Join("testdata", "golden", e.file)
			text := formatGolden(e, got)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (write it with -update)", err)
			}
			want, err := parseGolden(string(data))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			compareSections(t, path, got, want)
			if !t.Failed() && string(data) != text {
				t.Errorf("%s: sections match but the file differs (order, header): rewrite it with -update", path)
			}
		})
	}
}

// sections runs every case on the primary dialect, and on each variant
// where its output differs.
func (e goldenEngine) sections(t *testing.T) []section {
	var out []section
	seen := map[string]bool{}
	for _, c := range goldenCases {
		name := c.method
		if c.name != "" {
			name += "/" + c.name
		}
		if seen[name] {
			t.Fatalf("two golden cases are named %s", name)
		}
		seen[name] = true
		body := c.run(e.primary.d, e.fixture)
		out = append(out, section{name, body})
		for _, v := range e.variants {
			if vb := c.run(v.d, e.fixture); vb != body {
				out = append(out, section{name + " [" + v.name + "]", vb})
			}
		}
	}
	return out
}

func compareSections(t *testing.T, path string, got, want []section) {
	t.Helper()
	wantBy := map[string]string{}
	for _, s := range want {
		wantBy[s.name] = s.body
	}
	gotBy := map[string]bool{}
	for _, s := range got {
		gotBy[s.name] = true
		w, ok := wantBy[s.name]
		switch {
		case !ok:
			t.Errorf("%s: no section %q (rewrite the file with -update, and read the diff):\n%s", path, s.name, s.body)
		case w != s.body:
			t.Errorf("%s: %s changed:\n--- got\n%s\n--- want\n%s", path, s.name, s.body, w)
		}
	}
	for _, s := range want {
		if !gotBy[s.name] {
			t.Errorf("%s: section %q has no case any more (rewrite the file with -update)", path, s.name)
		}
	}
}

// formatGolden is a golden file: a header, then the sections.
func formatGolden(e goldenEngine, secs []section) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Golden SQL of the %s dialect, from golden_test.go and golden_cases_test.go.\n", e.primary.name)
	b.WriteString("# A section \"-- Method/case --\" is what one case of a method renders; \"args:\"\n")
	b.WriteString("# of a Query are the logical values its parameters take (#i), of another\n")
	b.WriteString("# statement the values themselves.\n")
	if len(e.variants) > 0 {
		var names []string
		for _, v := range e.variants {
			names = append(names, v.name)
		}
		fmt.Fprintf(&b, "# \"-- Method/case [variant] --\" is the same case on %s,\n", strings.Join(names, " or "))
		fmt.Fprintf(&b, "# there only where it differs from %s.\n", e.primary.name)
	}
	b.WriteString("# Rewrite: go test ./dialect/ -run TestGolden -update\n")
	for _, s := range secs {
		b.WriteString("\n-- " + s.name + " --\n" + s.body + "\n")
	}
	return b.String()
}

// parseGolden reads the sections of a golden file: a line "-- NAME --"
// starts one, which runs to the blank line before the next (or the end).
func parseGolden(text string) ([]section, error) {
	var out []section
	var cur *section
	var body []string
	flush := func() {
		if cur != nil {
			cur.body = strings.TrimSuffix(strings.Join(body, "\n"), "\n")
			out = append(out, *cur)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") && len(line) > 6 {
			flush()
			cur, body = &section{name: line[3 : len(line)-3]}, nil
			continue
		}
		if cur == nil {
			if line != "" && !strings.HasPrefix(line, "#") {
				return nil, fmt.Errorf("text before the first section: %q", line)
			}
			continue
		}
		body = append(body, line)
	}
	flush()
	return out, nil
}

// TestGolden_EveryMethod fails when a method of Dialect has no golden
// case, so that no statement lands unpinned; and when a case names a
// method that Dialect (or BulkInserter) does not have.
func TestGolden_EveryMethod(t *testing.T) {
	methods := func(typ reflect.Type) []string {
		var out []string
		for i := range typ.NumMethod() {
			out = append(out, typ.Method(i).Name)
		}
		return out
	}
	dialect := methods(reflect.TypeFor[Dialect]())
	known := append(slices.Clone(dialect), methods(reflect.TypeFor[BulkInserter]())...)
	cased := map[string]int{}
	for _, c := range goldenCases {
		cased[c.method]++
		if !slices.Contains(known, c.method) {
			t.Errorf("golden case %s/%s: Dialect has no method %s", c.method, c.name, c.method)
		}
	}
	// The readers of Definitions run their queries (several, assembled):
	// their tests run them against the servers (def_db_test.go).
	readers := []string{"ListTables", "ReadTable", "NotMigrated"}
	for _, m := range dialect {
		if cased[m] == 0 && !slices.Contains(readers, m) {
			t.Errorf("Dialect.%s has no golden case: add one to goldenCases (golden_cases_test.go) and run -update", m)
		}
	}
	if len(dialect) < 40 {
		t.Errorf("reflection found %d methods of Dialect; the role interfaces are not embedded?", len(dialect))
	}
}

// TestParseGolden: a file formatted is read back as the same sections.
func TestParseGolden(t *testing.T) {
	secs := []section{{"A", "SELECT 1"}, {"B/two lines", "SELECT\n  2\nargs: nil"}, {"C [v]", ""}}
	got, err := parseGolden(formatGolden(goldenEngines[1], secs))
	if err != nil || !reflect.DeepEqual(got, secs) {
		t.Errorf("got %q, %v; want %q", got, err, secs)
	}
}
