package main_test

// Network and resource faults under a running holder, on real services:
// connections to the target reset, Redis answering slowly, the target's
// disk full.

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// TestRun_ConnectionResets: every connection of the holder to the target
// is reset, for a second, twice during a run (a middlebox restarting, a
// server's network flapping). The holder waits for the target without
// spending its retries and without giving up its lease, and finishes: every
// row, no takeover, nothing stale; a batch whose commit reply was lost may
// be written again, nothing more.
func TestRun_ConnectionResets(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		const n, batch, resets = 400000, 500, 2
		const outage = time.Second
		e.batchSize, e.leaseTTL = batch, "5s"
		seedBig(t, e, "big", n)
		px, via := proxied(t, "target", e.dstURL)
		e.dstURL = via // the holder's only; e.dstDB checks the target directly
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 1})

		p := startMigrate(t, "run", "-p", plan, "--json", "--instance", "a")
		at := e.waitProgress(t, p, "big", n/20, n/2)
		var prev time.Time
		for i := 1; i <= resets; i++ {
			if i > 1 {
				time.Sleep(time.Second) // the resets begin about 3s apart
				// Copying again since the last reset, and not done yet.
				at = e.waitProgress(t, p, "big", at+4*batch, n)
			}
			start := time.Now()
			if i > 1 {
				t.Logf("reset %d begins %v after reset %d began", i, start.Sub(prev).Round(10*time.Millisecond), i-1)
			}
			prev = start
			if err := px.Reset(outage); err != nil {
				t.Fatal(err)
			}
			after := e.mustRowsDone(t, "big")
			poll(t, 30*time.Second, "the copy to go on after the reset", func() bool {
				select {
				case <-p.done:
					t.Fatalf("migrate exited before copying on after reset %d:\n%s", i, p.wait(t))
				default:
				}
				return e.mustRowsDone(t, "big") > after
			})
			t.Logf("reset %d: at %d rows done, connections reset for %v; the next batch committed %v after the reset began (%d rows done at its end)",
				i, at, outage, time.Since(start).Round(10*time.Millisecond), after)
			at = after
		}

		r := p.wait(t)
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		unavailable := strings.Count(r.stderr, "database unavailable, retrying")
		other := strings.Count(r.stderr, "batch failed, retrying") + strings.Count(r.stderr, "could not take the shard, retrying")
		t.Logf("run took %v: rows_written %d (%d again), %d batches, %d unavailable retries, %d other retries",
			r.elapsed.Round(time.Millisecond), rep.RowsWritten, rep.RowsWritten-n, rep.Batches, unavailable, other)
		for _, line := range strings.Split(r.stderr, "\n") {
			if strings.Contains(line, "retrying") {
				t.Log(line)
			}
		}
		if unavailable == 0 {
			t.Errorf("no retry on the reset connections logged:\n%s", r.stderr)
		}
		if len(rep.Takeovers) != 0 || rep.StaleRejections != 0 {
			t.Errorf("takeovers %+v, stale_rejections %d; want none and 0", rep.Takeovers, rep.StaleRejections)
		}
		if len(rep.Shards) != 1 || rep.Shards[0].State != "done" || rep.Shards[0].Token != 1 {
			t.Errorf("shards %+v, want big#0 done with token 1", rep.Shards)
		}
		// A commit whose reply was lost in a reset is written again; at most a
		// batch or two per reset.
		if rep.RowsWritten < n || rep.RowsWritten > n+2*batch*resets {
			t.Errorf("rows_written %d, want %d to %d", rep.RowsWritten, n, n+2*batch*resets)
		}
		if tok, _ := e.fence(t, "big", 0); tok != 1 {
			t.Errorf("watermark token %d, want 1: the holder kept its lease", tok)
		}
		if cp := e.checkpoint(t, "big", 0); cp.state != "done" || cp.rowsDone != n {
			t.Errorf("checkpoint %+v, want done with %d rows", cp, n)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

// TestRun_RedisLatencySpike: Redis answers the holder slowly for a while
// (400ms a call), well within what its 3s lease tolerates: renewals, every
// 1s, still succeed before the local deadline (sent + 3s - 30ms - 300ms).
// The spike outlasts that validity, so a holder whose renewals failed under
// the latency would certainly lose its lease. The holder keeps the lease
// and finishes; a standby watching the lease (through Redis directly) never
// takes over.
//
// A gate paces the copy, whatever the machine's speed: the holder waits at
// n/4 rows until the spike begins, one more stage of 5000 rows opens every
// 250ms of it, and the last stays shut until it ends. The holder writes
// through the spike and cannot finish before it.
//
// PostgreSQL to PostgreSQL only: the lease's renewals under a slow Redis
// are under test, and they do not touch the engines; a holder's commits
// bounded by its lease are TestRun_RedisDownFencesHolder's in both
// same-engine pairs.
func TestRun_RedisLatencySpike(t *testing.T) {
	t.Parallel()
	inDirections(t, []direction{pgToPG}, func(t *testing.T, e *env) {
		const n, stage, stages = 200000, 5000, 13
		const latency, spike = 400 * time.Millisecond, 3 * time.Second
		e.batchSize, e.leaseTTL = 500, "3s"
		seedBig(t, e, "big", n)
		var conds []string
		for i := range stages {
			conds = append(conds, fmt.Sprintf("NEW.id > %d", n/4+i*stage))
		}
		g := e.gateBig(t, conds...)
		direct := e.redisURL
		px, via := proxied(t, "redis", direct)
		e.redisURL = via
		holderPlan := e.plan(t, planTable{name: "big", key: []string{"id"}})
		e.redisURL = direct
		standbyPlan := e.plan(t, planTable{name: "big", key: []string{"id"}})

		h := startMigrate(t, "run", "-p", holderPlan, "--json", "--instance", "holder")
		g.waitHeld(t, h, 1)
		s := startMigrate(t, "run", "-p", standbyPlan, "--json", "--instance", "standby")
		poll(t, 30*time.Second, "the second instance to stand by", func() bool {
			return strings.Contains(s.stderr.String(), "standby: lease held by another instance")
		})
		at := e.mustRowsDone(t, "big")

		if err := px.Slow(latency); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		paced := make(chan struct{})
		go func() { // g is the pacer's alone until it is done
			defer close(paced)
			for i := range stages - 1 {
				g.open(t, i)
				time.Sleep(time.Until(start.Add(time.Duration(i+1) * spike / (stages - 1))))
			}
		}()
		defer func() { <-paced }() // before the gate's cleanup, should the test fail meanwhile
		// The proxy does slow a Redis client down.
		rc := redis.NewClient(netfaultRedisOptions(t, via))
		defer rc.Close()
		if err := rc.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		ping := time.Now()
		if err := rc.Ping(t.Context()).Err(); err != nil || time.Since(ping) < latency {
			t.Fatalf("a PING through the slowed proxy took %v (%v), want at least %v", time.Since(ping), err, latency)
		}
		<-paced // the spike's time is over
		during := e.mustRowsDone(t, "big")
		if err := px.Slow(0); err != nil {
			t.Fatal(err)
		}
		g.openAll(t)
		t.Logf("Redis slowed by %v for %v, from %d to %d rows done", latency, time.Since(start).Round(10*time.Millisecond), at, during)

		hr := h.wait(t)
		wantCode(t, hr, 0)
		var hrep runReport
		decodeJSON(t, hr, &hrep)
		sr := s.wait(t)
		wantCode(t, sr, 0)
		var srep runReport
		decodeJSON(t, sr, &srep)
		t.Logf("holder: %v, rows_written %d; standby: %v, rows_written %d; renewal failures logged: %d",
			hr.elapsed.Round(time.Millisecond), hrep.RowsWritten, sr.elapsed.Round(time.Millisecond), srep.RowsWritten,
			strings.Count(hr.stderr, "lease renewal failed"))
		if len(hrep.Takeovers) != 0 || len(srep.Takeovers) != 0 || hrep.StaleRejections != 0 || srep.StaleRejections != 0 {
			t.Errorf("holder takeovers %+v stale %d, standby takeovers %+v stale %d; want none",
				hrep.Takeovers, hrep.StaleRejections, srep.Takeovers, srep.StaleRejections)
		}
		if hrep.RowsWritten != n || srep.RowsWritten != 0 {
			t.Errorf("holder wrote %d rows, standby %d; want %d and 0", hrep.RowsWritten, srep.RowsWritten, n)
		}
		if tok, owner := e.fence(t, "big", 0); tok != 1 || !strings.HasPrefix(owner, "holder") {
			t.Errorf("watermark token %d of %q, want 1 of the holder: the lease never changed hands", tok, owner)
		}
		if cp := e.checkpoint(t, "big", 0); cp.state != "done" || cp.rowsDone != n || cp.token != 1 {
			t.Errorf("checkpoint %+v, want done with %d rows and token 1", cp, n)
		}
		if strings.Contains(hr.stderr, "local deadline passed") {
			t.Errorf("the holder lost its lease by its local deadline:\n%s", hr.stderr)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

// netfaultRedisOptions are the go-redis options of a redis:// URL.
func netfaultRedisOptions(t *testing.T, rawURL string) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// netfaultSmallDisk mounts a tmpfs of size on a fresh folder owned by the
// postgres user and returns it; it is unmounted when the test ends, after
// anything registered later (a server using it) has stopped. A machine
// where mount is not permitted fails the test: it is not skipped.
func netfaultSmallDisk(t *testing.T, size string) string {
	t.Helper()
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("no postgres user to own the small disk: %v", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	dir, err := os.MkdirTemp("", "migrate-smalldisk-") // not t.TempDir: the postgres user must reach it
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		_ = os.Remove(dir)
		t.Fatalf("this test needs to mount a %s tmpfs (root, or CAP_SYS_ADMIN) to fill the target's disk: mount -t tmpfs %s: %v\n%s",
			size, dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s; detaching it lazily", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
		_ = os.Remove(dir)
	})
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRun_TargetDiskFull: the target table lives on a disk too small for
// it. The batch that does not fit fails the same way every time: the shard
// halts after its retries (exit 5), naming the full disk, with only whole
// batches in the target. Once the table is moved to a disk with room, an
// operator's resume and a new run finish the copy.
func TestRun_TargetDiskFull(t *testing.T) {
	t.Parallel()
	const size = "6m"
	testsvc.PostgresURL(t)             // PostgreSQL, and so its user, is installed
	disk := netfaultSmallDisk(t, size) // before StartPostgres: unmounted after the server stops
	pgs := testsvc.StartPostgres(t)
	// PostgreSQL to PostgreSQL: a tablespace puts the target table alone
	// on the small disk; MySQL has no such place for one table.
	e := newEnv(t, pgEngine, pgEngine)
	const n, batch, retries = 200000, 1000, 2
	e.batchSize, e.leaseTTL = batch, "5s"
	e.extra = "max_retries: " + strconv.Itoa(retries) + "\n" // the default 5 would wait about 15s
	e.dstURL, e.dstDB = pgs.URL, testsvc.OpenPostgres(t, pgs.URL)
	seedBig(t, e, "big", n)
	exec1(t, e.dstDB, `CREATE TABLESPACE small LOCATION '`+disk+`'`)
	exec1(t, e.dstDB, `CREATE TABLE big (id bigint PRIMARY KEY USING INDEX TABLESPACE small, payload text, n integer) TABLESPACE small`)
	plan := e.plan(t, planTable{name: "big", key: []string{"id"}})

	r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "full")
	wantCode(t, r, 5)
	out := r.stdout + r.stderr
	if !strings.Contains(out, "No space left on device") || !strings.Contains(out, "53100") {
		t.Errorf("the halt does not name the full disk (SQLSTATE 53100, No space left on device):\n%s", r)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "No space left on device") {
			t.Log(line)
		}
	}
	// Not an outage (waited for), not a refused value (halts at once): a
	// failure retried max_retries times.
	if got := strings.Count(r.stderr, "batch failed, retrying"); got < retries || strings.Contains(r.stderr, "database unavailable") ||
		!strings.Contains(out, "failed "+strconv.Itoa(retries+1)+" times") {
		t.Errorf("%d retries logged, want the halt after max_retries (%d) retries, none as an unavailable database:\n%s", got, retries, r)
	}
	cp := e.checkpoint(t, "big", 0)
	rows := queryInt(t, e.dstDB, `SELECT count(*) FROM big`)
	t.Logf("halted after %v: %d rows done (%d in the target) on the %s disk", r.elapsed.Round(time.Millisecond), cp.rowsDone, rows, size)
	if cp.state != "halted" || cp.rowsDone <= 0 || cp.rowsDone >= n || cp.rowsDone%batch != 0 || rows != cp.rowsDone {
		t.Errorf("checkpoint %+v with %d rows in the target; want halted with whole batches of %d, as many as the target holds", cp, rows, batch)
	}
	if top := queryInt(t, e.dstDB, `SELECT coalesce(max(id), 0) FROM big`); top != cp.rowsDone {
		t.Errorf("the target's highest key is %d, want %d: the rows of whole batches only", top, cp.rowsDone)
	}

	// Room again: the table and its index move to the data directory.
	exec1(t, e.dstDB, `ALTER TABLE big SET TABLESPACE pg_default`)
	exec1(t, e.dstDB, `ALTER INDEX big_pkey SET TABLESPACE pg_default`)
	wantCode(t, runMigrate(t, "resume", "-p", plan), 0)
	r = runMigrate(t, "run", "-p", plan, "--json", "--instance", "room")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	t.Logf("after resume: %v, rows_written %d", r.elapsed.Round(time.Millisecond), rep.RowsWritten)
	if rep.RowsWritten != n-cp.rowsDone {
		t.Errorf("rows_written %d, want the %d rows left", rep.RowsWritten, n-cp.rowsDone)
	}
	if end := e.checkpoint(t, "big", 0); end.state != "done" || end.rowsDone != n {
		t.Errorf("checkpoint %+v, want done with %d rows", end, n)
	}
	assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
}
