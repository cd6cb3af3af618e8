package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

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
				fmt.Fprintf(w, "| %s | %s | %s |\n", name, mdValue(s.Source, c), mdValue(s.Target, c))
			}
		}
	}
}

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

// mdValue is one sample value in a table cell: — for a row that is not on
// that side, NULL, *(empty)*, or the canonical text in code quotes, cut at
// 80 runes.
func mdValue(row map[string]any, col string) string {
	if row == nil {
		return "—"
	}
	v, ok := row[col]
	if !ok || v == nil {
		return "NULL"
	}
	s := fmt.Sprint(v)
	if s == "" {
		return "*(empty)*"
	}
	if r := []rune(s); len(r) > 80 {
		s = string(r[:80]) + "…"
	}
	return "`" + mdEscape(strings.ReplaceAll(s, "`", "'")) + "`"
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(s)
}
