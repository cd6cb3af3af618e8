package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/migrate-dev/migrate/runner"
)

// writeReport writes a Markdown report to path with write.
func writeReport(path string, write func(io.Writer)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	write(f)
	return f.Close()
}

// writeDryRunMarkdown writes a dry run's forecast as Markdown.
func writeDryRunMarkdown(w io.Writer, d *runner.DryRun) {
	fmt.Fprintf(w, "# Dry run of plan %s\n\nNothing was written and no lease was taken.\n\n", mdEscape(d.Plan))
	fmt.Fprintln(w, "| table | source rows | would insert | would update | unchanged | target only | estimate |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, t := range d.Tables {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %.1f s |\n", mdEscape(t.Table), t.SourceRows, t.WouldInsert, t.WouldUpdate, t.Unchanged, t.TargetOnly, float64(t.EstimateMs)/1000)
	}
	for _, t := range d.Tables {
		fmt.Fprintf(w, "\n## %s\n", mdEscape(t.Table))
		if len(t.Schema) > 0 {
			fmt.Fprint(w, "\nSchema differences:\n\n")
			for _, s := range t.Schema {
				fmt.Fprintf(w, "- %s\n", mdEscape(s))
			}
		}
		if len(t.DDL) > 0 {
			fmt.Fprint(w, "\nThe run would execute:\n\n```sql\n")
			for _, q := range t.DDL {
				fmt.Fprintf(w, "%s;\n", q)
			}
			fmt.Fprintln(w, "```")
		}
		if len(t.Notes) > 0 {
			fmt.Fprint(w, "\nNot reproduced in the target:\n\n")
			for _, n := range t.Notes {
				fmt.Fprintf(w, "- %s\n", mdEscape(n))
			}
		}
	}
	if len(d.PostLoad) > 0 {
		fmt.Fprint(w, "\n## After the data\n\nThe post-load phase would execute, in order:\n\n```sql\n")
		for _, q := range d.PostLoad {
			fmt.Fprintf(w, "%s;\n", q)
		}
		fmt.Fprintln(w, "```")
	}
	if len(d.NotMigrated) > 0 {
		fmt.Fprint(w, "\n## Not migrated\n\n")
		for _, n := range d.NotMigrated {
			fmt.Fprintf(w, "- %s\n", mdEscape(n))
		}
	}
}

// writeMarkdown writes a verification as Markdown: a summary table, then
// per table its counts and sample rows side by side, differing columns
// marked in bold.
func writeMarkdown(w io.Writer, plan string, v *runner.Verification) {
	result := "equal"
	if !v.Equal {
		result = "**DIFFERENT**"
	}
	fmt.Fprintf(w, "# Verification of plan %s: %s\n\n", mdEscape(plan), result)
	fmt.Fprintln(w, "| table | source rows | target rows | missing | extra | changed | result |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|")
	for _, t := range v.Tables {
		r := "equal"
		if !t.Equal() {
			r = "**DIFFERENT**"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %s |\n", mdEscape(t.Table), t.SourceRows, t.TargetRows, t.Missing, t.Extra, t.Changed, r)
	}
	for _, t := range v.Tables {
		fmt.Fprintf(w, "\n## %s\n\n", mdEscape(t.Table))
		fmt.Fprintf(w, "Source rows: %d. Target rows: %d. Missing in the target: %d. Only in the target: %d. Changed: %d.\n",
			t.SourceRows, t.TargetRows, t.Missing, t.Extra, t.Changed)
		if len(t.Samples) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nSample differences (%d shown; differing columns in bold):\n", len(t.Samples))
		for _, s := range t.Samples {
			fmt.Fprintf(w, "\n### %s row, key %s\n\n", s.Kind, mdEscape(s.Key))
			fmt.Fprintln(w, "| column | source | target |")
			fmt.Fprintln(w, "|---|---|---|")
			for _, c := range sampleColumns(s.Source, s.Target) {
				name := mdEscape(c)
				if slices.Contains(s.Columns, c) {
					name = "**" + name + "**"
				}
				src, dst := mdValues(s.Source, s.Target, c)
				fmt.Fprintf(w, "| %s | %s | %s |\n", name, src, dst)
			}
		}
		fmt.Fprintln(w, "\n"+mdLegend)
	}
}

// mdLegend explains how values are shown in the samples tables.
const mdLegend = "*In values, · is a space at the start or end, ␤ a line feed, ␍ a carriage return, … text left out; — means no row on that side.*"

func sampleColumns(a, b map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]any{a, b} {
		for c := range m {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Strings(out)
	return out
}

const (
	cellRunes    = 80 // the longest text shown of a value
	contextRunes = 20 // shown before the first difference of long values
)

// mdValues is column col of a sample's source and target rows as table
// cells. Long values are cut at cellRunes runes; when that would hide how
// they differ, both show the same window from a little before their first
// difference.
func mdValues(src, dst map[string]any, col string) (string, string) {
	a, b := text(src, col), text(dst, col)
	start := 0
	if a != b && cut(a, 0) == cut(b, 0) {
		start = max(0, firstDiff(a, b)-contextRunes)
	}
	return mdValue(src, col, start), mdValue(dst, col, start)
}

// text is the value of column col, "" for none or NULL.
func text(row map[string]any, col string) string {
	if v := row[col]; v != nil {
		return fmt.Sprint(v)
	}
	return ""
}

// mdValue is one sample value in a table cell: — for a row that is not on
// that side, NULL, *(empty)*, or the canonical text from rune start, cut,
// in a code span.
func mdValue(row map[string]any, col string, start int) string {
	if row == nil {
		return "—"
	}
	if row[col] == nil {
		return "NULL"
	}
	if s := text(row, col); s != "" {
		return mdCode(visible(cut(s, start)))
	}
	return "*(empty)*"
}

// cut is up to cellRunes runes of s from rune start, with … for text left
// out on either side.
func cut(s string, start int) string {
	r := []rune(s)
	end := min(start+cellRunes, len(r))
	out := string(r[start:end])
	if start > 0 {
		out = "…" + out
	}
	if end < len(r) {
		out += "…"
	}
	return out
}

// firstDiff is the index of the first rune where a and b differ.
func firstDiff(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	i := 0
	for i < len(ra) && i < len(rb) && ra[i] == rb[i] {
		i++
	}
	return i
}

// visible shows line breaks as ␤ and ␍, which would end a table row, and
// spaces at either end as ·, which Markdown strips.
func visible(s string) string {
	s = strings.NewReplacer("\n", "␤", "\r", "␍").Replace(s)
	t := strings.TrimLeft(s, " ")
	u := strings.TrimRight(t, " ")
	return strings.Repeat("·", len(s)-len(t)) + u + strings.Repeat("·", len(t)-len(u))
}

// mdCode is s in a code span inside a table cell (CommonMark, GFM): the
// delimiters are a backtick run longer than any in s, with a space inside
// them when s starts or ends with a backtick, and pipes are escaped even
// there, as GFM splits cells first.
func mdCode(s string) string {
	run, longest := 0, 0
	for _, c := range s {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	d := strings.Repeat("`", longest+1)
	return d + strings.ReplaceAll(s, "|", `\|`) + d
}

// mdEscape is s as literal Markdown text in a heading, list item or table
// cell: line breaks and spaces at the ends made visible, and punctuation
// that Markdown could read as markup backslash-escaped, except underscores
// between letters or digits, which never delimit emphasis (so names such as
// order_items stay readable).
func mdEscape(s string) string {
	r := []rune(visible(s))
	var b strings.Builder
	for i, c := range r {
		if strings.ContainsRune("\\`*_[]<&|~#", c) &&
			!(c == '_' && i > 0 && i+1 < len(r) && isAlnum(r[i-1]) && isAlnum(r[i+1])) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func isAlnum(c rune) bool { return unicode.IsLetter(c) || unicode.IsDigit(c) }
