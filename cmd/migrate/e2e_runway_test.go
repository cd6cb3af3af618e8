package main_test

import (
	"strings"
	"testing"
)

// Issue 12, item 1, as reported: PG→PG, lease_ttl 1s, batch_size 100000.
// A batch of 100,000 rows takes longer than the 0.45 × TTL the lease's
// runway allows; the holder used to renew its lease forever with rows_done
// stuck at the first batch. Validation warns with the numbers, and the run
// writes smaller batches and finishes.
func TestRun_BatchLongerThanLeaseRunway(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgEngine, pgEngine) // as reported; the slow rows are a PL/pgSQL trigger
	e.leaseTTL, e.batchSize = "1s", 100000
	const n = 150000
	seedBig(t, e, "events", n)
	// However fast the machine, a batch of 100,000 rows takes over 1s here:
	// every 100th row costs 1ms to write.
	exec1(t, e.dstDB, `CREATE TABLE events (id bigint PRIMARY KEY, payload text, n integer)`)
	exec1(t, e.dstDB, `CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.id % 100 = 0 THEN PERFORM pg_sleep(0.001); END IF; RETURN NEW; END $$`)
	exec1(t, e.dstDB, `CREATE TRIGGER slow BEFORE INSERT OR UPDATE ON events FOR EACH ROW EXECUTE FUNCTION slow()`)
	plan := e.plan(t, planTable{name: "events", key: []string{"id"}})
	v := runMigrate(t, "validate", "-p", plan)
	wantCode(t, v, 0)
	if !strings.Contains(v.stderr, "warning: lease_ttl 1s with batch_size 100000") || !strings.Contains(v.stderr, "use lease_ttl >= 2.3s or batch_size <= 43500") {
		t.Errorf("validate: want a warning with the numbers, got %s", v)
	}
	r := runMigrate(t, "run", "-p", plan, "--json")
	wantCode(t, r, 0)
	if !strings.Contains(r.stderr, "batch_size 100000") || !strings.Contains(r.stderr, "a batch does not fit the lease's runway; writing smaller batches") {
		t.Errorf("run: want the plan's warning and the smaller batches logged, got %s", r.stderr)
	}
	assertSameRows(t, e, "events", "events", bigColumns, []string{"id"}, n)
	if cp := e.checkpoint(t, "events", 0); cp.rowsDone != n {
		t.Errorf("checkpoint rows_done %d, want %d", cp.rowsDone, n)
	}
	t.Logf("MEASURED: %d rows with lease_ttl 1s and batch_size 100000 in %v", n, r.elapsed)
}
