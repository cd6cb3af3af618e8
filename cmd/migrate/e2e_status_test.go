package main_test

import (
	"encoding/json"
	"fmt"
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
//
// The two shards held (of three, --parallel 2) copy half their range and
// wait at a gate in the target, however fast the machine: neither can end
// (and leave the third just started, with no rate published yet) while
// status is read. Their batches wait inside their transactions, well within
// the 30s lease.
func TestStatus_RateAndETA(t *testing.T) {
	t.Parallel()
	// PostgreSQL source: rows_estimated must be exact, as reltuples is after
	// ANALYZE; MySQL's estimate (information_schema TABLE_ROWS) is a sample.
	e := newEnv(t, pgEngine, pgEngine)
	const n, perShard = 300000, 100000 // ids 1..n: shard i holds (i*perShard, (i+1)*perShard]
	e.batchSize, e.leaseTTL = 500, "30s"
	seedBig(t, e, "big", n)
	exec1(t, e.srcDB, `ANALYZE big`) // the estimate the holders publish
	// Each shard stops at the first row of its batch past the middle.
	g := e.gateBig(t, fmt.Sprintf("NEW.id %% %d > %d", perShard, perShard/2))
	plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 3})
	p := startMigrate(t, "run", "-p", plan, "--instance", "a", "--parallel", "2", "--no-verify")
	g.waitHeld(t, p, 2)

	// Each holder publishes its pace every second: wait for the first one
	// after its rows committed. The pace, smoothed, halves each second at
	// the gate; it stays above 0 for long.
	var seen statusReport
	poll(t, 30*time.Second, "a status with the rates of both held shards", func() bool {
		seen = readStatus(t, plan)
		rated := 0
		for _, s := range seen.Tables {
			if s.Rate != nil && *s.Rate > 0 {
				rated++
			}
		}
		return rated == 2
	})
	if len(seen.Totals) != 1 {
		t.Fatalf("totals %+v, want one table", seen.Totals)
	}
	tot := seen.Totals[0]
	if tot.Shards != 3 || tot.ShardsRunning != 2 || tot.ShardsDone != 0 || tot.Rate == nil || *tot.Rate <= 0 || tot.EtaMs == nil || *tot.EtaMs <= 0 ||
		tot.RowsEstimated == nil || *tot.RowsEstimated != n || tot.RowsDone != n/3 {
		t.Errorf("totals mid-run %+v (rate %v, eta %v, estimated %v): want 3 shards, 2 running, none done, a rate, a time left, %d rows estimated, %d done",
			tot, deref(tot.Rate), deref(tot.EtaMs), deref(tot.RowsEstimated), n, n/3)
	}
	var sum float64
	for _, s := range seen.Tables {
		switch {
		case s.Rate != nil:
			sum += *s.Rate
			if s.EtaMs == nil || *s.EtaMs < 0 || s.State != "running" || s.RowsDone != perShard/2 {
				t.Errorf("shard %d: %s, %d rows, rate %v, eta %v; want running, %d rows, a time left", s.Shard, s.State, s.RowsDone, *s.Rate, deref(s.EtaMs), perShard/2)
			}
		case s.State != "pending" || s.EtaMs != nil:
			t.Errorf("shard %d: %s, eta %v; want the third shard pending, without a rate or a time left", s.Shard, s.State, deref(s.EtaMs))
		}
	}
	if tot.Rate != nil && *tot.Rate != sum {
		t.Errorf("table rate %v, want the sum of its shards' %v", *tot.Rate, sum)
	}
	text := runMigrate(t, "status", "-p", plan)
	t.Logf("status mid-run:\n%s", text.stdout)
	if !strings.Contains(text.stdout, "SHARDS DONE") || !strings.Contains(text.stdout, "rows/s") {
		t.Errorf("status text without the per-table totals or rates:\n%s", text.stdout)
	}

	g.openAll(t)
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
