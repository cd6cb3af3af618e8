package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scrape serves m until the test ends and returns the /metrics body.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s, %v", resp.Status, err)
	}
	return string(body)
}

func TestMetrics_Serve(t *testing.T) {
	m := New("p1")
	m.RowsWritten("users", 0, 100)
	m.RowsWritten("users", 0, 50)
	m.BatchCommitted("users", 0)
	m.BatchCommitted("users", 0)
	m.BatchFailed("users", 1)
	m.RecoveryFailed("users", 1)
	m.StaleRejected("users", 1)
	m.RenewalFailed("users", 1)
	m.SelfFenced("users", 1)
	m.SetBacklog("users", 0, 850)
	m.SetToken("users", 0, 7)
	m.VerifyDifferences("users", 1, 2, 3)

	body := scrape(t, m)
	for _, want := range []string{
		`migrate_rows_written_total{plan="p1",shard="0",table="users"} 150`,
		`migrate_batches_committed_total{plan="p1",shard="0",table="users"} 2`,
		`migrate_batches_failed_total{plan="p1",shard="1",table="users"} 1`,
		`migrate_recovery_failures_total{plan="p1",shard="1",table="users"} 1`,
		`migrate_stale_token_rejections_total{plan="p1",shard="1",table="users"} 1`,
		`migrate_lease_renewal_failures_total{plan="p1",shard="1",table="users"} 1`,
		`migrate_self_fence_stops_total{plan="p1",shard="1",table="users"} 1`,
		`migrate_recovery_backlog_rows{plan="p1",shard="0",table="users"} 850`,
		`migrate_fence_token{plan="p1",shard="0",table="users"} 7`,
		`migrate_verify_differences{kind="missing",plan="p1",table="users"} 1`,
		`migrate_verify_differences{kind="extra",plan="p1",table="users"} 2`,
		`migrate_verify_differences{kind="changed",plan="p1",table="users"} 3`,
		`migrate_oldest_task_age_seconds{plan="p1"} 0`,
		`go_goroutines{plan="p1"} `,
		`process_start_time_seconds{plan="p1"} `,
	} {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("scrape lacks line %q", want)
		}
	}
	if strings.Contains(body, "migrate_takeovers_total") {
		t.Error("takeovers_total reported before any takeover")
	}
}

func TestMetrics_Takeover(t *testing.T) {
	m := New("p")
	m.Takeover("users", 2, Takeover{
		Wait: 10 * time.Second, Elect: 250 * time.Millisecond, Recover: 1500 * time.Millisecond,
		Verify: 250 * time.Millisecond, RTO: 12 * time.Second, Predicted: 11 * time.Second, Token: 42, Expired: true,
	})
	m.Takeover("users", 2, Takeover{RTO: 4 * time.Second, Token: 43}) // a clean handover: no reclaim
	want := `
# HELP migrate_takeovers_total Shards taken over from a previous holder.
# TYPE migrate_takeovers_total counter
migrate_takeovers_total{plan="p",shard="2",table="users"} 2
# HELP migrate_lease_expiry_reclaims_total Takeovers after the previous holder's lease expired.
# TYPE migrate_lease_expiry_reclaims_total counter
migrate_lease_expiry_reclaims_total{plan="p",shard="2",table="users"} 1
# HELP migrate_last_rto_seconds RTO of the shard's last takeover.
# TYPE migrate_last_rto_seconds gauge
migrate_last_rto_seconds{plan="p",shard="2",table="users"} 4
# HELP migrate_fence_token Fence token held by this instance.
# TYPE migrate_fence_token gauge
migrate_fence_token{plan="p",shard="2",table="users"} 43
# HELP migrate_rto_seconds RTO of takeovers.
# TYPE migrate_rto_seconds histogram
migrate_rto_seconds_bucket{plan="p",table="users",le="1"} 0
migrate_rto_seconds_bucket{plan="p",table="users",le="2"} 0
migrate_rto_seconds_bucket{plan="p",table="users",le="3"} 0
migrate_rto_seconds_bucket{plan="p",table="users",le="5"} 1
migrate_rto_seconds_bucket{plan="p",table="users",le="8"} 1
migrate_rto_seconds_bucket{plan="p",table="users",le="13"} 2
migrate_rto_seconds_bucket{plan="p",table="users",le="20"} 2
migrate_rto_seconds_bucket{plan="p",table="users",le="30"} 2
migrate_rto_seconds_bucket{plan="p",table="users",le="45"} 2
migrate_rto_seconds_bucket{plan="p",table="users",le="60"} 2
migrate_rto_seconds_bucket{plan="p",table="users",le="90"} 2
migrate_rto_seconds_bucket{plan="p",table="users",le="120"} 2
migrate_rto_seconds_bucket{plan="p",table="users",le="180"} 2
migrate_rto_seconds_bucket{plan="p",table="users",le="300"} 2
migrate_rto_seconds_bucket{plan="p",table="users",le="+Inf"} 2
migrate_rto_seconds_sum{plan="p",table="users"} 16
migrate_rto_seconds_count{plan="p",table="users"} 2
`
	names := []string{"migrate_takeovers_total", "migrate_lease_expiry_reclaims_total", "migrate_last_rto_seconds", "migrate_fence_token", "migrate_rto_seconds"}
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	t.Run("parts", func(t *testing.T) {
		m := New("p")
		m.Takeover("users", 0, Takeover{Wait: 10 * time.Second, Elect: 250 * time.Millisecond,
			Recover: 1500 * time.Millisecond, Verify: 250 * time.Millisecond, RTO: 12 * time.Second, Predicted: 11 * time.Second})
		want := `
# HELP migrate_last_rto_part_seconds Parts of the last RTO: wait, elect, recover, verify.
# TYPE migrate_last_rto_part_seconds gauge
migrate_last_rto_part_seconds{part="elect",plan="p",shard="0",table="users"} 0.25
migrate_last_rto_part_seconds{part="recover",plan="p",shard="0",table="users"} 1.5
migrate_last_rto_part_seconds{part="verify",plan="p",shard="0",table="users"} 0.25
migrate_last_rto_part_seconds{part="wait",plan="p",shard="0",table="users"} 10
# HELP migrate_predicted_rto_seconds Predicted RTO of the shard.
# TYPE migrate_predicted_rto_seconds gauge
migrate_predicted_rto_seconds{plan="p",shard="0",table="users"} 11
`
		names := []string{"migrate_last_rto_part_seconds", "migrate_predicted_rto_seconds"}
		if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), names...); err != nil {
			t.Error(err)
		}
		if n := testutil.CollectAndCount(m.reclaims); n != 0 {
			t.Errorf("lease expiry reclaims after a takeover without Expired: %d series, want 0", n)
		}
	})
}

func TestMetrics_SetState(t *testing.T) {
	m := New("p")
	m.SetState("users", 0, "running")
	m.Halted("users", 0)
	want := `
# HELP migrate_shard_state 1 for the shard's current state, 0 for the others.
# TYPE migrate_shard_state gauge
migrate_shard_state{plan="p",shard="0",state="done",table="users"} 0
migrate_shard_state{plan="p",shard="0",state="halted",table="users"} 1
migrate_shard_state{plan="p",shard="0",state="pending",table="users"} 0
migrate_shard_state{plan="p",shard="0",state="running",table="users"} 0
migrate_shard_state{plan="p",shard="0",state="standby",table="users"} 0
# HELP migrate_shards_halted_total Shards set halted; each needs an operator.
# TYPE migrate_shards_halted_total counter
migrate_shards_halted_total{plan="p",shard="0",table="users"} 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "migrate_shard_state", "migrate_shards_halted_total"); err != nil {
		t.Error(err)
	}
}

func TestMetrics_OldestTaskAge(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := New("p")
	m.now = func() time.Time { return now }
	age := func() string {
		for line := range strings.Lines(scrape(t, m)) {
			if strings.HasPrefix(line, "migrate_oldest_task_age_seconds{") {
				return strings.TrimSpace(line[strings.IndexByte(line, '}')+1:])
			}
		}
		t.Fatal("no migrate_oldest_task_age_seconds in scrape")
		return ""
	}

	m.SetState("users", 0, "running")
	m.SetState("users", 1, "running")
	m.SetState("orders", 0, "running")
	m.CursorMoved("users", 0, now.Add(-30*time.Second))
	m.CursorMoved("users", 1, now.Add(-5*time.Second))
	m.CursorMoved("orders", 0, now.Add(-90*time.Second))
	m.CursorMoved("users", 9, now.Add(-time.Hour)) // not running: ignored
	if got := age(); got != "90" {
		t.Errorf("age with orders/0 oldest = %s, want 90", got)
	}
	m.SetState("orders", 0, "done")
	m.CursorMoved("orders", 0, now.Add(-120*time.Second)) // a late move of a done shard: ignored
	if got := age(); got != "30" {
		t.Errorf("age after orders/0 done = %s, want 30", got)
	}
	m.SetState("users", 0, "standby")
	m.SetState("users", 1, "halted")
	if got := age(); got != "0" {
		t.Errorf("age with nothing running = %s, want 0", got)
	}
	m.SetState("users", 0, "running") // the clock restarts when a shard starts running
	now = now.Add(7 * time.Second)
	if got := age(); got != "7" {
		t.Errorf("age 7s after users/0 started running = %s, want 7", got)
	}
}

func TestMetrics_Nil(t *testing.T) {
	var m *Metrics
	m.RowsWritten("t", 0, 1)
	m.BatchCommitted("t", 0)
	m.BatchFailed("t", 0)
	m.Takeover("t", 0, Takeover{Expired: true})
	m.RecoveryFailed("t", 0)
	m.StaleRejected("t", 0)
	m.RenewalFailed("t", 0)
	m.SelfFenced("t", 0)
	m.Halted("t", 0)
	m.SetBacklog("t", 0, 1)
	m.SetToken("t", 0, 1)
	m.CursorMoved("t", 0, time.Now())
	m.SetState("t", 0, "running")
	m.VerifyDifferences("t", 1, 1, 1)
	if m.Handler() == nil {
		t.Error("Handler on nil is nil")
	}
}

func TestMetrics_concurrent(t *testing.T) {
	m := New("p")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				m.SetState("users", i, "running")
				m.RowsWritten("users", i, 10)
				m.CursorMoved("users", i, time.Now())
				m.Takeover("users", i, Takeover{RTO: time.Second})
				m.SetState("users", i, "done")
			}
		})
	}
	_ = scrape(t, m) // while the writers run
	wg.Wait()
	if got := testutil.ToFloat64(m.rows.WithLabelValues("users", "3")); got != 1000 {
		t.Errorf("rows written for users/3 = %v, want 1000", got)
	}
}

func TestNew_lint(t *testing.T) {
	m, _ := New("a"), New("b") // separate registries: no duplicate registration panic
	m.RowsWritten("t", 0, 1)
	m.Takeover("t", 0, Takeover{})
	m.SetState("t", 0, "pending")
	m.VerifyDifferences("t", 0, 0, 0)
	problems, err := testutil.GatherAndLint(m.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "migrate_") {
			t.Errorf("lint %s: %s", p.Metric, p.Text)
		}
	}
}
