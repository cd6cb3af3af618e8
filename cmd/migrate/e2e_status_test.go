package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// statusReport is what the tests read of `status --json`.
type statusReport struct {
	Plan   string `json:"plan"`
	Tables []struct {
		Table    string   `json:"table"`
		Shard    int      `json:"shard"`
		State    string   `json:"state"`
		RowsDone int64    `json:"rows_done"`
		Holder   string   `json:"holder"`
		Rate     *float64 `json:"rows_per_sec"`
		EtaMs    *int64   `json:"eta_ms"`
	} `json:"tables"`
	Leases []struct {
		Table string `json:"table"`
		Shard int    `json:"shard"`
		Owner string `json:"owner"`
	} `json:"leases"`
	Totals []struct {
		Table         string   `json:"table"`
		Shards        int      `json:"shards"`
		ShardsDone    int      `json:"shards_done"`
		ShardsRunning int      `json:"shards_running"`
		RowsDone      int64    `json:"rows_done"`
		RowsEstimated *int64   `json:"rows_estimated"`
		Rate          *float64 `json:"rows_per_sec"`
		EtaMs         *int64   `json:"eta_ms"`
	} `json:"totals"`
}

func readStatus(t *testing.T, plan string) statusReport {
	t.Helper()
	r := runMigrate(t, "status", "-p", plan, "--json")
	wantCode(t, r, 0)
	var st statusReport
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	return st
}

// TestStatus_RateAndETA: while a run copies, status shows each held
// shard's rows/s and time left, and per table the shards done, the rows
// estimated and the summed pace; once done, ETAs are 0.
func TestStatus_RateAndETA(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 300000
	e.batchSize, e.leaseTTL = 500, "3s"
	seedBig(t, e.src, "big", n)
	exec1(t, e.src, `ANALYZE big`) // the estimate the holders publish
	plan := e.writePlan(t, tableSpec{name: "big", key: []string{"id"}, shards: 3})
	p := startMigrate(t, "run", "-p", plan, "--instance", "a", "--parallel", "2", "--no-verify")

	var seen statusReport
	poll(t, 60*time.Second, "a status with rates", func() bool {
		st := readStatus(t, plan)
		if len(st.Totals) != 1 || st.Totals[0].Rate == nil || st.Totals[0].EtaMs == nil {
			return false
		}
		seen = st
		return true
	})
	tot := seen.Totals[0]
	if tot.Shards != 3 || tot.ShardsRunning != 2 || *tot.Rate <= 0 || tot.RowsEstimated == nil || *tot.RowsEstimated != n {
		t.Errorf("totals mid-run %+v (rate %v, estimated %v): want 3 shards, 2 running, a rate, %d rows estimated", tot, deref(tot.Rate), deref(tot.RowsEstimated), n)
	}
	rated := 0
	for _, s := range seen.Tables {
		if s.Rate != nil {
			rated++
			if *s.Rate <= 0 || s.EtaMs == nil || *s.EtaMs < 0 || s.State != "running" {
				t.Errorf("shard %d: %s, rate %v, eta %v", s.Shard, s.State, *s.Rate, deref(s.EtaMs))
			}
		}
	}
	if rated != 2 {
		t.Errorf("%d shards with a rate mid-run, want the 2 held", rated)
	}
	text := runMigrate(t, "status", "-p", plan)
	t.Logf("status mid-run:\n%s", text.stdout)
	if !strings.Contains(text.stdout, "SHARDS DONE") || !strings.Contains(text.stdout, "rows/s") {
		t.Errorf("status text without the per-table totals or rates:\n%s", text.stdout)
	}

	wantCode(t, p.wait(t), 0)
	st := readStatus(t, plan)
	if tot := st.Totals[0]; tot.ShardsDone != 3 || tot.RowsDone != n || tot.EtaMs == nil || *tot.EtaMs != 0 || tot.Rate != nil {
		t.Errorf("totals after the run %+v: want 3 done, %d rows, eta 0, no rate", tot, n)
	}
	for _, s := range st.Tables {
		if s.EtaMs == nil || *s.EtaMs != 0 || s.Rate != nil {
			t.Errorf("shard %d after the run: rate %v eta %v, want none and 0", s.Shard, deref(s.Rate), deref(s.EtaMs))
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
