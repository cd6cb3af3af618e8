package main_test

import (
	"fmt"
	"testing"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// TestRun_RedisCluster: two instances share an 8-shard table through a real
// three-node Redis Cluster (leases spread over the nodes by hash tag); both
// write, every shard once, and status reads the cluster.
func TestRun_RedisCluster(t *testing.T) {
	t.Parallel()
	rc := testsvc.StartRedisCluster(t, 3)
	e := newEnv(t, pgEngine, pgEngine) // about Redis: the engines do not matter here

	const n = 80000
	e.redisURL, e.batchSize, e.leaseTTL = rc.URL, 500, "3s"
	seedBig(t, e, "big", n)
	plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 8})
	twoShare(t, e, plan, n)
	r := runMigrate(t, "status", "-p", plan, "--json")
	wantCode(t, r, 0)
	var st statusReport
	decodeJSON(t, r, &st)
	if len(st.Tables) != 8 || len(st.Leases) != 0 {
		t.Errorf("status through the cluster: %d shards, leases %+v; want 8 and none held", len(st.Tables), st.Leases)
	}
	for _, s := range st.Tables {
		if s.State != "done" {
			t.Errorf("shard %d is %s, want done", s.Shard, s.State)
		}
	}
	assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
}

// TestRun_SentinelFailover: Sentinel promotes the replica in the middle of a
// run through a redis+sentinel URL; the run follows the new primary and
// finishes with every row once, and nothing stale accepted.
func TestRun_SentinelFailover(t *testing.T) {
	t.Parallel()
	rs := testsvc.StartRedisSentinel(t)
	e := newEnv(t, pgEngine, pgEngine) // about Redis: the engines do not matter here
	const n = 120000
	e.redisURL, e.batchSize, e.leaseTTL = rs.URL, 500, "5s"
	seedBig(t, e, "big", n)
	// Both shards wait at a gate in their middle through the failover,
	// renewing their leases, and copy the rest after it: however fast the
	// copy, the run cannot end before the failover.
	per := int64(n / 2) // shard i holds (i*per, (i+1)*per]
	g := e.gateBig(t, fmt.Sprintf("NEW.id %% %d > %d", per, per/2))
	w := e.countWrites(t, "big")
	plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 2})

	p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "a")
	g.waitHeld(t, p, 2)
	at := e.mustRowsDone(t, "big")
	rs.Failover()
	if got := rs.PrimaryAddr(); got != rs.Replica.Addr() {
		t.Fatalf("primary %s after the failover, want %s", got, rs.Replica.Addr())
	}
	g.openAll(t)
	r := p.wait(t)
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	t.Logf("failover at %d rows done; run: %d rows written, takeovers %+v", at, rep.RowsWritten, rep.Takeovers)
	if rep.RowsWritten != n || rep.StaleRejections != 0 || len(rep.Shards) != 2 {
		t.Errorf("rows_written %d stale_rejections %d shards %+v; want %d, 0 and 2 shards", rep.RowsWritten, rep.StaleRejections, rep.Shards, n)
	}
	if writes := w.settled(t, n); writes > n+int64(len(rep.Takeovers))*int64(e.batchSize) {
		t.Errorf("the target saw %d row writes for %d rows, more than one batch per takeover", writes, n)
	}
	assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
}
