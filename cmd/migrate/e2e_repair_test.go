package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/lock/redislock"
)

// TestRepair: repair copies missing and changed rows again under the lease
// and fence, deletes target-only rows only with --delete-extra, and leaves
// verify clean, in all four directions.
func TestRepair(t *testing.T) {
	t.Parallel()
	for _, dir := range directions {
		t.Run(dir.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, dir.src, dir.dst)
			tb, plan := runOrders(t, e)
			n := int64(len(tb.rows))
			q, ph := e.dst.quote, e.dst.ph
			orders := q("orders")
			tamper(t, e, 2, fmt.Sprintf("DELETE FROM %s WHERE %s IN (1000, 1007)", orders, q("id")))
			tamper(t, e, 1, fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s = 1014", orders, q("name"), ph(1), q("id")), "tampered")
			tamper(t, e, 1, fmt.Sprintf("UPDATE %s SET %s = '' WHERE %s = 3", orders, q("note"), q("id")))
			step := map[string]string{"postgres": "interval '1 microsecond'", "mysql": "INTERVAL 1 MICROSECOND"}[e.dst.name]
			tamper(t, e, 1, fmt.Sprintf("UPDATE %s SET %s = %s + %s WHERE %s = 1021", orders, q("ts"), q("ts"), step, q("id")))
			insertRows(t, e.dst, e.dstDB, "orders", []string{"id", "name"}, [][]any{{int64(5), "extra 5"}, {int64(6), "extra 6"}, {int64(7), "extra 7"}})

			var rep struct {
				Tables []struct {
					Recopied  int64 `json:"recopied"`
					Deleted   int64 `json:"deleted"`
					ExtraLeft int64 `json:"extra_left"`
				} `json:"tables"`
				Verify *verifyOut `json:"verify"`
			}
			// Without --delete-extra the target-only rows stay: exit 3.
			r := runMigrate(t, "repair", "-p", plan, "--json")
			wantCode(t, r, 3)
			decodeJSON(t, r, &rep)
			if len(rep.Tables) != 1 || rep.Tables[0].Recopied != 5 || rep.Tables[0].Deleted != 0 || rep.Tables[0].ExtraLeft != 3 {
				t.Fatalf("repair: %+v, want 5 rows copied again (2 missing, 3 changed), 3 extra left", rep.Tables)
			}
			wantCounts(t, rep.Verify.Tables[0], tb.name, n, n+3, 0, 3, 0)
			// With it, they go and verify is clean.
			r = runMigrate(t, "repair", "-p", plan, "--delete-extra", "--json")
			wantCode(t, r, 0)
			decodeJSON(t, r, &rep)
			if rep.Tables[0].Recopied != 0 || rep.Tables[0].Deleted != 3 || !rep.Verify.Equal {
				t.Fatalf("repair --delete-extra: %+v verify %+v, want 3 deleted and equal", rep.Tables, rep.Verify)
			}
			v := runVerify(t, 0, "-p", plan)
			wantCounts(t, v.Tables[0], tb.name, n, n, 0, 0, 0)
			assertSameDump(t, e, tb, len(tb.rows))
			// The repair wrote under the lease and fence: the watermark moved
			// past the run's token, and the repaired rows carry the new one.
			if tok, owner := e.fence(t, "orders", 0); tok < 2 || owner == "" {
				t.Errorf("watermark %d of %q after two repairs, want above the run's token 1", tok, owner)
			}
		})
	}
}

// TestRepair_LeaseHeld: repair refuses while another instance holds a
// shard's lease, and writes nothing.
func TestRepair_LeaseHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgEngine, pgEngine) // a lease in Redis: the engines do not matter here
	_, plan := runOrders(t, e)
	opts, err := redis.ParseURL(e.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	l, err := lock.New(redislock.New(rdb, "redis", nil), lock.Options{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(t.Context(), "migrate:{"+e.name+":orders:0}", lock.NewOwnerID("running-holder"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	tamper(t, e, 1, `DELETE FROM orders WHERE id = 1000`)
	r := runMigrate(t, "repair", "-p", plan)
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr, "running-holder") {
		t.Errorf("stderr does not name the holder:\n%s", r)
	}
	if tok, _ := e.fence(t, "orders", 0); tok != 1 {
		t.Errorf("watermark %d, want the run's 1: a refused repair claims nothing", tok)
	}
}

// TestTakeover_NeighbourhoodCheck: a takeover compares the last committed
// batch before the resume point with the source; a row of it changed behind
// the copy's back is reported, the run ends with exit 3, and repair fixes it.
func TestTakeover_NeighbourhoodCheck(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		const n = 100000
		e.leaseTTL, e.batchSize = "2s", 1000
		seedBig(t, e, "big", n)
		// The holder waits at the first row of the batch past n/2 when it is
		// killed: mid-run, however fast it copies.
		g := e.gateBig(t, fmt.Sprintf("NEW.id > %d", n/2))
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})
		first := startMigrate(t, "run", "-p", plan, "--instance", "victim")
		g.waitHeld(t, first, 1)
		first.kill(t)
		g.drop(t) // its batch at the gate ends with its connection, as a killed client's does
		g.openAll(t)
		cp := e.checkpoint(t, "big", 0)
		// The ids are 1..n in order: the last committed key is rows_done.
		res, err := e.dstDB.Exec(fmt.Sprintf(`DELETE FROM big WHERE id = %d`, cp.rowsDone-1))
		if err != nil {
			t.Fatal(err)
		}
		if k, _ := res.RowsAffected(); k != 1 {
			t.Fatalf("deleted %d rows of the last committed batch, want 1", k)
		}
		r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "survivor")
		wantCode(t, r, 3)
		var rep runReport
		decodeJSON(t, r, &rep)
		if len(rep.Takeovers) != 1 || rep.Takeovers[0].CheckedRows != 2*int64(e.batchSize) || rep.Takeovers[0].CheckDiffs != 1 {
			t.Fatalf("takeovers %+v, want one that checked %d rows (the last committed and the first new batch) and found 1 difference", rep.Takeovers, 2*e.batchSize)
		}
		if !strings.Contains(r.stderr, "differs from the source") {
			t.Errorf("the difference is not in the log:\n%s", r.stderr)
		}
		wantCode(t, runMigrate(t, "repair", "-p", plan), 0)
	})
}
