package main_test

// End-to-end tests of the lock services besides Redis (whose drills are in
// e2e_drill_test.go): a lease table in the target (lock: db, the default
// with no lock service named), etcd and ZooKeeper each run the same drills
// — kill, pause past the TTL, partition, late write and, for the services
// the drill can restart, lock-restart — and must pass the drill's own
// criteria (no stale write accepted, at most one batch replayed, a clean
// verification) and the checks of the target by SQL that the Redis drills
// make. The restart of a database that keeps the leases is
// TestRun_DatabaseCrash/target_keeping_leases.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// lockService is one lock service of the end-to-end tests.
type lockService struct {
	name string
	url  func(t *testing.T) string // the plan's lock:
	// restartable: the drill can restart it (its own private server)
	restartable bool
}

var lockServices = []lockService{
	{"db", func(*testing.T) string { return plans.LockDB }, false},
	{"etcd", func(t *testing.T) string { return testsvc.EtcdURL(t) }, true},
	{"zookeeper", func(t *testing.T) string { return testsvc.ZooKeeperURL(t) }, true},
}

// predictedRtoMs is the runner's prediction of the wait before a takeover
// (lock.Backend.MaxWait) on e's lock service, for a TTL of ttlMs.
func (e *env) predictedRtoMs(ttlMs int64) int64 {
	if strings.HasPrefix(e.lock, "etcd") {
		return ttlMs + 500
	}
	return ttlMs + ttlMs/10
}

// TestLocks_Drills runs every drill on each lock service, one after the
// other on one plan (--reset between them), with the 2s TTL of the Redis
// drills: etcd grants leases in whole seconds.
func TestLocks_Drills(t *testing.T) {
	t.Parallel()
	for _, ls := range lockServices {
		t.Run(ls.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, pgEngine, pgEngine)
			e.leaseTTL, e.lock = "2s", ls.url(t)
			seedBig(t, e, "big", drillRows)
			plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 1})
			kinds := []string{"kill", "pause", "partition", "late-write"}
			if ls.restartable {
				kinds = append(kinds, "lock-restart")
			}
			for _, kind := range kinds {
				r, res := runDrill(t, plan, kind, "--reset")
				wantPass(t, r, res)
				for _, d := range res.Drills {
					switch kind {
					case "kill":
						wantExits(t, d, -1)
						handedOver(t, e, d, 0)
						t.Logf("RTO after SIGKILL on %s, TTL %dms: %dms measured (wait %d + elect %d + recover %d + verify %d), predicted %dms; handover seen %dms after the kill",
							ls.name, d.TTLMs, d.RtoMs, d.Takeovers[0].WaitMs, d.Takeovers[0].ElectMs, d.Takeovers[0].RecoverMs, d.Takeovers[0].VerifyMs, d.PredictedRtoMs, d.HandoverMs)
					case "lock-restart":
					default:
						wantExits(t, d, 4)
						handedOver(t, e, d, 0)
					}
				}
				assertDrillRows(t, e)
			}
		})
	}
}

// TestLocks_NoRedis: the plan-less form with no lock service named keeps
// its leases in the target: `migrate run --source … --target … --table …
// --key …` copies, verifies and leaves the lease released in
// _migrate_lease; a second instance meanwhile stands by on the same table.
func TestLocks_NoRedis(t *testing.T) {
	t.Parallel()
	inDirections(t, []direction{pgToMy, myToPG}, func(t *testing.T, e *env) {
		const n = 20000
		seedBig(t, e, "big", n)
		args := []string{"run", "--table", "big", "--key", "id", "--lease-ttl", "2s", "--json"}
		env := []string{"MIGRATE_SOURCE=" + e.srcURL, "MIGRATE_TARGET=" + e.dstURL}
		a := startMigrateEnv(t, env, append(args, "--instance", "a")...)
		b := startMigrateEnv(t, env, append(args, "--instance", "b")...)
		ra, rb := a.wait(t), b.wait(t)
		wantCode(t, ra, 0)
		wantCode(t, rb, 0)
		if strings.Contains(ra.stderr+rb.stderr, "redis:") {
			t.Errorf("a run with no lock service named mentions redis:\n%s\n%s", ra.stderr, rb.stderr)
		}
		tab := e.dst.table("_migrate_lease")
		if got := queryInt(t, e.dstDB, "SELECT count(*) FROM "+tab+" WHERE token >= 1 AND released"); got < 1 {
			t.Errorf("%d released leases in %s, want the shard's and the post-load phase's", got, tab)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

// TestLocks_ServiceDown: the lock service (a private etcd, a private
// ZooKeeper) is SIGKILLed in the middle of a run and stays down for 10s
// (past the holder's 2s lease, past the 5s bound of an acquire and past
// all that max_retries 2 allows), then starts again with its data. The
// holder loses its lease, waits the lock service out as an outage
// (max_outage), not as failures, takes the shard again and finishes: exit
// 0, the target equal to the source. Without lock.ErrUnavailable both
// exited 4 after 11s.
//
// The gate holds the holder's batch until the lock service is down, and
// opens then: a batch held longer ends at the session's bound (half the
// lease) and counts as a failed batch, and two such (max_retries 1, the
// gate held until the restart) halted the shard on a loaded machine
// before its lease ran out.
func TestLocks_ServiceDown(t *testing.T) {
	for _, svc := range []string{"etcd", "zookeeper"} {
		t.Run(svc, func(t *testing.T) {
			t.Parallel()
			inDirections(t, []direction{pgToPG}, func(t *testing.T, e *env) {
				var stop, start func()
				if svc == "etcd" {
					s := testsvc.StartEtcd(t)
					e.lock, stop, start = s.URL, s.Stop, s.Start
				} else {
					s := testsvc.StartZooKeeper(t)
					e.lock, stop, start = s.URL(testsvc.Prefix(t)), s.Stop, s.Start
				}
				const n = 40000
				e.batchSize, e.leaseTTL, e.maxRetries = 500, "2s", 2
				seedBig(t, e, "big", n)
				g := e.gateBig(t, fmt.Sprintf("NEW.id > %d", n/2))
				plan := e.plan(t, planTable{name: "big", key: []string{"id"}})
				p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "a")
				g.waitHeld(t, p, 1)
				stop()
				g.openAll(t)
				time.Sleep(10 * time.Second)
				start()
				r := p.wait(t)
				wantCode(t, r, 0)
				if !strings.Contains(r.stderr, "could not take the shard, retrying") {
					t.Errorf("no retry while the lock service was down:\n%s", r.stderr)
				}
				var rep runReport
				decodeJSON(t, r, &rep)
				if rep.StaleRejections != 0 {
					t.Errorf("%d stale rejections, want 0", rep.StaleRejections)
				}
				assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
			})
		})
	}
}
