package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestFollow_RetentionCapHalts: a stream whose source keeps more of its log
// for it than max_retained_log_mb is halted (exit 5) with what to do, before
// it reads on; `migrate abandon` then drops the slot.
func TestFollow_RetentionCapHalts(t *testing.T) {
	e := newEnv(t, pgEngine, pgEngine)
	e.leaseTTL = "2s"
	exec1(t, e.srcDB, `CREATE TABLE items (id bigint PRIMARY KEY, v text)`)
	exec1(t, e.srcDB, `INSERT INTO items SELECT g, 'x' FROM generate_series(1, 100) g`)
	e.extra = "max_retained_log_mb: 1\n"
	plan := e.plan(t, planTable{name: "public.items"})
	abandoned := false
	t.Cleanup(func() {
		if !abandoned {
			runMigrate(t, "abandon", "-p", plan)
		}
	})
	holder := startMigrate(t, "run", "-p", plan, "--follow", "--no-progress")
	poll(t, 2*time.Minute, "the copy done and the stream following", func() bool {
		r := runMigrate(t, "status", "-p", plan, "--json")
		var st struct {
			Tables []struct{ State string } `json:"tables"`
			Stream *struct{ State string }  `json:"stream"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st.Stream == nil || len(st.Tables) == 0 {
			return false
		}
		for _, s := range st.Tables {
			if s.State != "done" {
				return false
			}
		}
		return st.Stream.State == "following"
	})
	holder.kill(t)
	// About 4 MiB of WAL for the stream while no applier reads it.
	exec1(t, e.srcDB, `INSERT INTO items SELECT g, repeat('y', 1000) FROM generate_series(1000, 5000) g`)
	r := runMigrate(t, "run", "-p", plan, "--follow", "--no-progress")
	wantCode(t, r, 5)
	if !strings.Contains(r.stderr, "max_retained_log_mb 1") || !strings.Contains(r.stderr, "migrate abandon") {
		t.Fatalf("the halt does not name the cap and the way out:\n%s", r.stderr)
	}
	r = runMigrate(t, "abandon", "-p", plan)
	wantCode(t, r, 0)
	abandoned = true
	if n := queryInt(t, e.srcDB, `SELECT count(*) FROM pg_replication_slots WHERE database = current_database()`); n != 0 {
		t.Fatalf("%d replication slots left after abandon", n)
	}
}
