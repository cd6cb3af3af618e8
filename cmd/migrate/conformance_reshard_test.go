package main_test

import (
	"fmt"
	"testing"
)

// confReshard: a new plan on a table an earlier plan filled starts its
// tokens above the tokens in the table's rows (issue 12, item 4). Plan A is
// killed mid-run and a standby finishes it with token 2, so its rows carry
// token 1 or 2; plan B, a new name with two shards, used to start at token 1
// and halt at once (exit 5, "another writer owns them").
func confReshard(t *testing.T, e *env) {
	const n = 30000
	e.leaseTTL, e.batchSize = "2s", 1000
	tb := bigTable(n)
	tb.create(t, e.src, e.srcDB)
	// Plan A waits at the first row past n/2: the kill finds it mid-run.
	g := e.gateTable(t, tb, fmt.Sprintf("NEW.id > %d", n/2))
	plan := e.plan(t, planTable{name: tb.name, key: tb.key})
	first := startMigrate(t, "run", "-p", plan, "--instance", "victim")
	g.waitHeld(t, first, 1)
	first.kill(t)
	g.drop(t) // its batch at the gate ends with its connection, as a killed client's does
	g.openAll(t)
	wantCode(t, runMigrate(t, "run", "-p", plan, "--instance", "standby"), 0)
	tokA, _ := e.fence(t, tb.name, 0)
	if tokA < 2 {
		t.Fatalf("plan A's watermark is %d after a takeover, want 2 or more", tokA)
	}
	// The source changes, then plan B re-shards the table.
	exec1(t, e.srcDB, fmt.Sprintf("UPDATE %s SET n = n + 5000 WHERE id %% 7 = 0", e.src.quote(tb.name)))
	for i := range tb.rows {
		if id := tb.rows[i][0].(int64); id%7 == 0 {
			tb.rows[i][2] = tb.rows[i][2].(int32) + 5000
		}
	}
	e.name += "_b"
	planB := e.plan(t, planTable{name: tb.name, key: tb.key, shards: 2})
	r := runMigrate(t, "run", "-p", planB, "--json")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	if rep.Verify == nil || !rep.Verify.Equal {
		t.Errorf("plan B's verification: %+v, want equal", rep.Verify)
	}
	for shard := range 2 {
		if tok, _ := e.fence(t, tb.name, shard); tok <= tokA {
			t.Errorf("plan B's shard %d holds token %d, want above plan A's %d", shard, tok, tokA)
		}
	}
	if k := queryInt(t, e.dstDB, fmt.Sprintf("SELECT count(*) FROM %s WHERE _fence <= %d", e.dst.quote(tb.name), tokA)); k != 0 {
		t.Errorf("%d target rows still carry plan A's tokens, want every row rewritten by plan B", k)
	}
	assertSameDump(t, e, tb, n)
}
