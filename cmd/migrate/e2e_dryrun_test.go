package main_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDryRun: `run --dry-run` forecasts what a run would do in all four
// directions, takes no lease and leaves the target exactly as it was.
func TestDryRun(t *testing.T) {
	t.Parallel()
	for _, dir := range directions {
		t.Run(dir.String(), func(t *testing.T) {
			t.Run("fresh_target", func(t *testing.T) {
				t.Parallel()
				dryRunFresh(t, newEnv(t, dir.src, dir.dst))
			})
			t.Run("used_target", func(t *testing.T) {
				t.Parallel()
				dryRunUsed(t, newEnv(t, dir.src, dir.dst))
			})
		})
	}
}

type dryRunOut struct {
	Plan   string `json:"plan"`
	DryRun bool   `json:"dry_run"`
	Tables []struct {
		Table       string   `json:"table"`
		SourceRows  int64    `json:"source_rows"`
		WouldInsert int64    `json:"would_insert"`
		WouldUpdate int64    `json:"would_update"`
		Unchanged   int64    `json:"unchanged"`
		TargetOnly  int64    `json:"target_only"`
		Schema      []string `json:"schema"`
		DDL         []string `json:"ddl"`
		EstimateMs  int64    `json:"estimate_ms"`
	} `json:"tables"`
}

func runDryRun(t *testing.T, plan string) dryRunOut {
	t.Helper()
	r := runMigrate(t, "run", "-p", plan, "--dry-run", "--json")
	wantCode(t, r, 0)
	var raw map[string]any
	decodeJSON(t, r, &raw)
	requireKeys(t, "run --dry-run --json", raw, "plan", "dry_run", "tables")
	for i, tb := range requireList(t, "run --dry-run --json", raw, "tables") {
		requireKeys(t, fmt.Sprintf("tables[%d]", i), tb, "table", "would_insert", "would_update", "unchanged", "target_only", "schema")
	}
	var out dryRunOut
	decodeJSON(t, r, &out)
	if !out.DryRun || len(out.Tables) != 1 {
		t.Fatalf("dry run %+v, want dry_run true and one table", out)
	}
	if !strings.Contains(runMigrate(t, "run", "-p", plan, "--dry-run").stdout, "nothing was written") {
		t.Error("the text output does not say nothing was written")
	}
	return out
}

// objects lists every table of the target database with its rows as text,
// helper tables included: a snapshot to compare byte for byte.
func objects(t *testing.T, e *env) string {
	t.Helper()
	q := map[string]string{
		"postgres": `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`,
		"mysql":    `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1`,
	}[e.dst.name]
	names := queryStrings(t, e.dstDB, q)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "table %s\n", n)
		if e.dst.name == "mysql" {
			var name string
			var sum sql.NullInt64
			if err := e.dstDB.QueryRow("CHECKSUM TABLE "+e.dst.quote(n)).Scan(&name, &sum); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "  checksum %d\n", sum.Int64)
			continue
		}
		for _, row := range queryStrings(t, e.dstDB, fmt.Sprintf(`SELECT t::text FROM %s t ORDER BY 1`, e.dst.quote(n))) {
			fmt.Fprintf(&b, "  %s\n", row)
		}
	}
	return b.String()
}

func dryRunFresh(t *testing.T, e *env) {
	tb := ordersTable()
	tb.create(t, e.src, e.srcDB)
	plan := e.plan(t, planTable{name: tb.name, key: tb.key})
	before := objects(t, e)
	d := runDryRun(t, plan)
	if after := objects(t, e); after != before || before != "" {
		t.Errorf("a dry run on a fresh target created objects:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	n := int64(len(tb.rows))
	got := d.Tables[0]
	if got.SourceRows != n || got.WouldInsert != n || got.WouldUpdate != 0 || got.Unchanged != 0 || got.TargetOnly != 0 {
		t.Errorf("forecast %+v, want %d rows to insert", got, n)
	}
	// The helper tables (_migrate_*) and the target table, in that order.
	helpers := len(got.DDL) - 1
	if helpers < 5 || !strings.Contains(got.DDL[helpers], "CREATE TABLE") || strings.Contains(got.DDL[helpers], "_migrate_") ||
		slices.ContainsFunc(got.DDL[:helpers], func(s string) bool { return !strings.Contains(s, "_migrate_") }) ||
		!slices.ContainsFunc(got.Schema, func(s string) bool { return strings.Contains(s, "does not exist") }) {
		t.Errorf("ddl %q schema %q, want the helper tables and the target table", got.DDL, got.Schema)
	}
	if got.EstimateMs <= 0 {
		t.Errorf("estimate %dms, want a positive estimate", got.EstimateMs)
	}
	if r := runMigrate(t, "status", "-p", plan, "--json"); !strings.Contains(r.stdout, `"leases": []`) {
		t.Errorf("a lease after the dry run:\n%s", r)
	}
}

func dryRunUsed(t *testing.T, e *env) {
	tb, plan := runOrders(t, e)
	q, ph := e.dst.quote, e.dst.ph
	orders := q("orders")
	tamper(t, e, 2, fmt.Sprintf("DELETE FROM %s WHERE %s IN (1000, 1007)", orders, q("id")))
	tamper(t, e, 1, fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s = 1014", orders, q("name"), ph(1), q("id")), "tampered")
	insertRows(t, e.dst, e.dstDB, "orders", []string{"id", "name"}, [][]any{{int64(5), "extra 5"}, {int64(6), "extra 6"}, {int64(7), "extra 7"}})
	before := objects(t, e)
	d := runDryRun(t, plan)
	if after := objects(t, e); after != before {
		t.Errorf("a dry run changed the target:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	n := int64(len(tb.rows))
	got := d.Tables[0]
	if got.SourceRows != n || got.WouldInsert != 2 || got.WouldUpdate != 1 || got.Unchanged != n-3 || got.TargetOnly != 3 || len(got.DDL) != 0 {
		t.Errorf("forecast %+v, want %d source rows: 2 to insert, 1 to update, %d unchanged, 3 target-only, no DDL", got, n, n-3)
	}
	md := filepath.Join(t.TempDir(), "dry.md")
	wantCode(t, runMigrate(t, "run", "-p", plan, "--dry-run", "--report", md), 0)
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if row := fmt.Sprintf("| orders | %d | 2 | 1 | %d | 3 |", n, n-3); !strings.Contains(string(b), row) || !strings.Contains(string(b), "Nothing was written") {
		t.Errorf("the Markdown report lacks %q:\n%s", row, b)
	}
	if after := objects(t, e); after != before {
		t.Error("writing the dry run's report changed the target")
	}
}

// TestJSON_EveryExit: with --json every exit prints one JSON object with
// the error: a dry run refused for a table without a key (exit 2) in the
// dry run's shape, a plan that cannot be read, a flag that does not exist,
// and a command (status) that fails before it can print its own.
func TestJSON_EveryExit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgEngine, pgEngine)
	exec1(t, e.srcDB, "CREATE TABLE nokey (a integer, b text)")
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, c := range []struct {
		name string
		args []string
		keys []string
	}{
		{"dry run of a table without a key", []string{"run", "-p", e.plan(t, planTable{name: "nokey"}), "--dry-run", "--json"}, []string{"plan", "dry_run", "tables", "error"}},
		{"dry run of a plan that cannot be read", []string{"run", "-p", missing, "--dry-run", "--json"}, []string{"dry_run", "error"}},
		{"run of a plan that cannot be read", []string{"run", "-p", missing, "--json"}, []string{"plan", "takeovers", "error"}},
		{"a flag that does not exist", []string{"run", "--json", "--no-such-flag"}, []string{"error", "exit_code"}},
		{"status of a plan that cannot be read", []string{"status", "-p", missing, "--json"}, []string{"error", "exit_code"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runMigrate(t, c.args...)
			wantCode(t, r, 2)
			var raw map[string]any
			decodeJSON(t, r, &raw)
			m := requireKeys(t, strings.Join(c.args, " "), raw, c.keys...)
			if msg, _ := m["error"].(string); msg == "" {
				t.Errorf("error %v, want the reason", m["error"])
			}
			if _, ok := m["dry_run"]; ok && m["dry_run"] != true {
				t.Errorf("dry_run %v, want true", m["dry_run"])
			}
		})
	}
}
