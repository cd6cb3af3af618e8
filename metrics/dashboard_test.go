package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboard is docs/grafana/migrate.json.
var dashboard = filepath.Join("..", "docs", "grafana", "migrate.json")

// queries are the PromQL expressions of a Grafana dashboard, by where
// they are: every panel's targets (rows' nested panels included), the
// annotations and the template variables.
func queries(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var d struct {
		SchemaVersion int     `json:"schemaVersion"`
		Panels        []panel `json:"panels"`
		Annotations   struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query struct {
					Query string `json:"query"`
				} `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("%s: schemaVersion %d, want a current one", path, d.SchemaVersion)
	}
	out := map[string]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for i, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("panel %q: target %d has no expr", p.Title, i)
				}
				out["panel "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			out["annotation "+a.Name] = a.Expr
		}
	}
	for _, v := range d.Templating.List {
		out["variable "+v.Name] = v.Query.Query
	}
	return out
}

var (
	metricRE = regexp.MustCompile(`\bmigrate_[a-z0-9_]+`)
	// labelRE finds the label names of an expression: in a selector's
	// matchers ({table="x"}), in by (...) and without (...), and in
	// label_values(metric, label).
	matchersRE = regexp.MustCompile(`\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	groupRE    = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	valuesRE   = regexp.MustCompile(`label_values\(\s*[a-z0-9_]+\s*,\s*([a-z_]+)\s*\)`)
)

// registered are the metrics of New, by name with their labels, and which
// of them are histograms.
func registered(t *testing.T) (names map[string][]string, histograms []string) {
	t.Helper()
	m := New("p")
	m.Takeover("t", 0, Takeover{}) // a histogram's type shows once it has a series
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetType().String() == "HISTOGRAM" {
			histograms = append(histograms, f.GetName())
		}
	}
	return m.Names(), histograms
}

// unknown lists what expr uses that names does not register: metric
// names (a histogram's _bucket, _sum and _count series are its own), and
// label names that none of the expression's metrics has (every series
// has plan; Prometheus adds instance and job; histograms' buckets have
// le).
func unknown(expr string, names map[string][]string, histograms []string) []string {
	var bad []string
	labels := []string{"plan", "instance", "job"}
	for _, n := range metricRE.FindAllString(expr, -1) {
		if _, ok := names[n]; !ok {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && slices.Contains(histograms, b) {
					base = b
					if suffix == "_bucket" {
						labels = append(labels, "le")
					}
				}
			}
			if _, ok := names[base]; !ok {
				bad = append(bad, "metric "+n)
				continue
			}
			n = base
		}
		labels = append(labels, names[n]...)
	}
	var used []string
	for _, m := range matchersRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range matcherRE.FindAllStringSubmatch(m[1], -1) {
			used = append(used, l[1])
		}
	}
	for _, m := range groupRE.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(m[1], ",") {
			used = append(used, strings.TrimSpace(l))
		}
	}
	for _, m := range valuesRE.FindAllStringSubmatch(expr, -1) {
		used = append(used, m[1])
	}
	for _, l := range used {
		if l != "" && !slices.Contains(labels, l) && !slices.Contains(bad, "label "+l) {
			bad = append(bad, "label "+l)
		}
	}
	return bad
}

// TestDashboard_Metrics: every metric and label docs/grafana/migrate.json
// queries is one New registers, so no panel of the dashboard is empty for
// a misspelt or renamed series.
func TestDashboard_Metrics(t *testing.T) {
	names, histograms := registered(t)
	qs := queries(t, dashboard)
	if len(qs) < 20 {
		t.Fatalf("%s: %d queries, want the dashboard's panels", dashboard, len(qs))
	}
	used := map[string]bool{}
	for where, expr := range qs {
		if !strings.Contains(expr, "migrate_") {
			t.Errorf("%s: %q queries no migrate metric", where, expr)
		}
		if where != "variable plan" && !strings.Contains(expr, `plan="$plan"`) {
			t.Errorf("%s: %q is not limited to the chosen plan", where, expr)
		}
		if bad := unknown(expr, names, histograms); len(bad) > 0 {
			t.Errorf("%s: %q uses what metrics.New does not register: %v", where, expr, bad)
		}
		for _, n := range metricRE.FindAllString(expr, -1) {
			used[n] = true
		}
	}
	// The series an on-call engineer needs are all on it.
	for _, n := range []string{
		"migrate_rows_written_total", "migrate_recovery_backlog_rows", "migrate_oldest_task_age_seconds", "migrate_shard_state",
		"migrate_shards_halted_total", "migrate_takeovers_total", "migrate_last_rto_seconds", "migrate_predicted_rto_seconds",
		"migrate_rto_seconds_bucket", "migrate_stale_token_rejections_total", "migrate_lease_renewal_failures_total",
		"migrate_verify_differences", "migrate_outbox_backlog", "migrate_outbox_oldest_pending_seconds",
		"migrate_outbox_events_delivered_total", "migrate_outbox_delivery_failures_total",
	} {
		if !used[n] {
			t.Errorf("the dashboard does not show %s", n)
		}
	}
}

// TestDashboard_Metrics_unknown: the check fails on a name or label that
// is not registered.
func TestDashboard_Metrics_unknown(t *testing.T) {
	names, histograms := registered(t)
	if !slices.Equal(histograms, []string{"migrate_rto_seconds"}) {
		t.Errorf("histograms %v, want migrate_rto_seconds", histograms)
	}
	for expr, want := range map[string][]string{
		`rate(migrate_rows_writen_total{plan="$plan"}[1m])`:                           {"metric migrate_rows_writen_total"},
		`sum by (tabel) (migrate_rows_written_total{plan="$plan"})`:                   {"label tabel"},
		`migrate_outbox_backlog{plan="$plan", table="t"}`:                             {"label table"},
		`histogram_quantile(0.9, sum by (le) (rate(migrate_rto_seconds_bucket[5m])))`: nil,
		`migrate_rto_seconds_count / migrate_rto_seconds_sum`:                         nil,
		`migrate_fence_token_count`:                                                   {"metric migrate_fence_token_count"},
		`label_values(migrate_shard_state, plan)`:                                     nil,
	} {
		if got := unknown(expr, names, histograms); !slices.Equal(got, want) {
			t.Errorf("unknown(%q) = %v, want %v", expr, got, want)
		}
	}
}

func TestMetrics_Names(t *testing.T) {
	names := New("p").Names()
	for n, want := range map[string][]string{
		"migrate_rows_written_total":      {"plan", "shard", "table"},
		"migrate_rto_seconds":             {"plan", "table"},
		"migrate_outbox_backlog":          {"plan", "sink"},
		"migrate_shard_state":             {"plan", "shard", "state", "table"},
		"migrate_oldest_task_age_seconds": {"plan"},
		"go_goroutines":                   {"plan"},
	} {
		if got := names[n]; !slices.Equal(got, want) {
			t.Errorf("Names()[%s] = %v, want %v", n, got, want)
		}
	}
}
