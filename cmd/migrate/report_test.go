package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/migrate-dev/migrate/runner"
	"github.com/migrate-dev/migrate/verify"
)

// markdownOf renders a verification with one changed sample row.
func markdownOf(s verify.Sample) string {
	s.Kind = "changed"
	var b strings.Builder
	writeMarkdown(&b, "p", &runner.Verification{Tables: []verify.Result{{Table: "t", Changed: 1, Samples: []verify.Sample{s}}}})
	return b.String()
}

// sampleCells renders one changed column v with the source and target
// values (nil for NULL) and returns its source and target cells.
func sampleCells(t *testing.T, src, dst any) (string, string) {
	t.Helper()
	md := markdownOf(verify.Sample{Key: "1", Source: map[string]any{"v": src}, Target: map[string]any{"v": dst}, Columns: []string{"v"}})
	for line := range strings.SplitSeq(md, "\n") {
		if rest, ok := strings.CutPrefix(line, "| **v** | "); ok {
			cells := strings.Split(strings.TrimSuffix(rest, " |"), " | ")
			if len(cells) != 2 {
				t.Fatalf("row %q does not have two value cells", line)
			}
			return cells[0], cells[1]
		}
	}
	t.Fatalf("no row for column v in\n%s", md)
	return "", ""
}

func TestMarkdown_Escaping(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"a`b", "``a`b``"},
		{"a``b`", "``` a``b` ```"},
		{"`a", "`` `a ``"},
		{"a|b", "`a\\|b`"},
		{`a\|b`, "`a\\\\|b`"},
		{"a\nb\r\nc", "`a␤b␍␤c`"},
		{"*x* _y_ <b>", "`*x* _y_ <b>`"},
	} {
		if got, _ := sampleCells(t, c.value, "other"); got != c.want {
			t.Errorf("value %q: cell %s, want %s", c.value, got, c.want)
		}
	}
	for _, c := range []struct{ key, want string }{
		{"1", "key 1"},
		{"a|b", `key a\|b`},
		{"*x* _y_ snake_case", `key \*x\* \_y\_ snake_case`},
		{"<b>x</b> &amp; [l](u) `c` ~~s~~ #", "key \\<b>x\\</b> \\&amp; \\[l\\](u) \\`c\\` \\~\\~s\\~\\~ \\#"},
		{"a\nb", "key a␤b"},
	} {
		md := markdownOf(verify.Sample{Key: c.key, Source: map[string]any{"v": "1"}, Target: map[string]any{"v": "2"}})
		if want := "\n### changed row, " + c.want + "\n"; !strings.Contains(md, want) {
			t.Errorf("key %q: report lacks %q:\n%s", c.key, want, md)
		}
	}
	md := markdownOf(verify.Sample{Key: "1", Source: map[string]any{"a|b": "1"}, Target: map[string]any{"a|b": "2"}, Columns: []string{"a|b"}})
	if !strings.Contains(md, "\n| **a\\|b** | `1` | `2` |\n") {
		t.Errorf("column a|b not escaped:\n%s", md)
	}
}

func TestMarkdown_LongValues(t *testing.T) {
	x := func(n int) string { return strings.Repeat("x", n) }
	for _, c := range []struct {
		name             string
		src, dst         any
		wantSrc, wantDst string
	}{
		{"short", "ab", "ac", "`ab`", "`ac`"},
		{"differ early", "a" + x(99), "b" + x(99), "`a" + x(79) + "…`", "`b" + x(79) + "…`"},
		{"differ late", x(100) + "1", x(100) + "2", "`…" + x(20) + "1`", "`…" + x(20) + "2`"},
		{"differ late, more after", x(100) + "1" + x(200), x(100) + "2" + x(200), "`…" + x(20) + "1" + x(59) + "…`", "`…" + x(20) + "2" + x(59) + "…`"},
		{"prefix", x(90), x(90) + "tail", "`…" + x(20) + "`", "`…" + x(20) + "tail`"},
		{"differ at the cut", x(80) + "1", x(80) + "2", "`…" + x(20) + "1`", "`…" + x(20) + "2`"},
		{"equal", x(100), x(100), "`" + x(80) + "…`", "`" + x(80) + "…`"},
		{"against NULL", x(100), nil, "`" + x(80) + "…`", "NULL"},
		{"multibyte", strings.Repeat("é", 90) + "1", strings.Repeat("é", 90) + "2", "`…" + strings.Repeat("é", 20) + "1`", "`…" + strings.Repeat("é", 20) + "2`"},
	} {
		src, dst := sampleCells(t, c.src, c.dst)
		if src != c.wantSrc || dst != c.wantDst {
			t.Errorf("%s: cells\n%s\n%s\nwant\n%s\n%s", c.name, src, dst, c.wantSrc, c.wantDst)
		}
		for _, cell := range []string{src, dst} {
			if n := utf8.RuneCountInString(cell); n > 84 {
				t.Errorf("%s: cell of %d runes", c.name, n)
			}
		}
	}
}

func TestMarkdown_EdgeSpaces(t *testing.T) {
	for _, c := range []struct{ src, dst, wantSrc, wantDst string }{
		{"a ", "a", "`a·`", "`a`"},
		{" a", "a", "`·a`", "`a`"},
		{" a ", "a", "`·a·`", "`a`"},
		{"ab   ", "ab", "`ab···`", "`ab`"},
		{"a  b", "a b", "`a  b`", "`a b`"},
		{" ", "  ", "`·`", "`··`"},
		{"`a` ", "`a`", "`` `a`· ``", "`` `a` ``"},
	} {
		if src, dst := sampleCells(t, c.src, c.dst); src != c.wantSrc || dst != c.wantDst {
			t.Errorf("%q vs %q: cells %s %s, want %s %s", c.src, c.dst, src, dst, c.wantSrc, c.wantDst)
		}
	}
	md := markdownOf(verify.Sample{Key: "1", Source: map[string]any{"v": "a "}, Target: map[string]any{"v": "a"}, Columns: []string{"v"}})
	if !strings.Contains(md, "|\n\n*In values, · is a space at the start or end") {
		t.Errorf("no legend under the samples:\n%s", md)
	}
}
