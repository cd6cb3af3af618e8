package main_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// TestRun_TakeoverLimitHalts kills two holders in turn with max_takeovers
// 1: the first takeover goes on, the second finds the shard taken over
// twice within the window and halts it (exit 5) instead of copying; status
// shows the count and the last takeover; `migrate resume` lets the next run
// finish.
//
// PostgreSQL to PostgreSQL only: the limit counts the takeover records in
// Redis; the takeovers run in every pair (TestRun_ResumeAfterSIGKILL, the
// conformance suite's sigkill_resume), a halt and resume too
// (TestRun_HaltAndResume).
func TestRun_TakeoverLimitHalts(t *testing.T) {
	t.Parallel()
	inDirections(t, []direction{pgToPG}, func(t *testing.T, e *env) {
		const n = 150000
		e.leaseTTL, e.batchSize, e.extra = "2s", 1000, "max_takeovers: 1\ntakeover_window: 10m\n"
		seedBig(t, e, "big", n)
		// Each holder is killed mid-run, however fast it copies: the first at a
		// gate past n/5, the second (which takes over there) at one past 2n/5.
		g := e.gateBig(t, fmt.Sprintf("NEW.id > %d", n/5), fmt.Sprintf("NEW.id > %d", n*2/5))
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})

		first := startMigrate(t, "run", "-p", plan, "--json", "--instance", "first")
		g.waitHeld(t, first, 1)
		first.kill(t)
		g.drop(t) // its batch at the gate ends with its connection, as a killed client's does
		g.open(t, 0)
		second := startMigrate(t, "run", "-p", plan, "--json", "--instance", "second")
		g.waitHeld(t, second, 1)
		second.kill(t)
		g.drop(t)
		g.openAll(t)
		if cp := e.checkpoint(t, "big", 0); cp.rowsDone != n*2/5 {
			t.Fatalf("checkpoint %+v after the second kill, want the %d rows before the second gate", cp, n*2/5)
		}

		r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "third")
		wantCode(t, r, 5)
		var rep runReport
		decodeJSON(t, r, &rep)
		if len(rep.Shards) != 1 || rep.Shards[0].State != "halted" || rep.RowsWritten != 0 {
			t.Errorf("third run: shards %+v rows_written %d, want the shard halted before any write\n%s", rep.Shards, rep.RowsWritten, r)
		}
		if cp := e.checkpoint(t, "big", 0); cp.state != "halted" {
			t.Errorf("checkpoint state %q, want halted", cp.state)
		}
		st := runMigrate(t, "status", "-p", plan, "--json")
		wantCode(t, st, 0)
		var status struct {
			Tables []struct {
				State        string `json:"state"`
				Takeovers    int64  `json:"takeovers"`
				LastTakeover *struct {
					Token         int64  `json:"token"`
					PreviousOwner string `json:"previous_owner"`
				} `json:"last_takeover"`
			} `json:"tables"`
		}
		decodeJSON(t, st, &status)
		if len(status.Tables) != 1 || status.Tables[0].Takeovers != 2 || status.Tables[0].LastTakeover == nil {
			t.Fatalf("status %+v, want one shard with 2 takeovers and the last one recorded", status)
		}
		// A halted shard is not resumed by another run, only by an operator.
		wantCode(t, runMigrate(t, "run", "-p", plan, "--json", "--instance", "fourth"), 5)
		wantCode(t, runMigrate(t, "resume", "-p", plan), 0)
		r = runMigrate(t, "run", "-p", plan, "--json", "--instance", "fifth")
		wantCode(t, r, 0)
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

// TestRun_MetricsAndStatus scrapes --metrics-addr of a holder and of a
// standby, kills the holder, and checks the standby's takeover in its
// metrics, in run --json and in status (SPEC §7).
//
// PostgreSQL to PostgreSQL only: the metrics and status of a takeover do
// not depend on the engines; the takeover itself runs in every pair
// (TestRun_ResumeAfterSIGKILL).
func TestRun_MetricsAndStatus(t *testing.T) {
	t.Parallel()
	inDirections(t, []direction{pgToPG}, func(t *testing.T, e *env) {
		const n = 300000
		e.leaseTTL, e.batchSize = "2s", 1000
		seedBig(t, e, "big", n)
		// The holder waits at a gate past n/10 while it is scraped, the standby
		// starts and it is killed: mid-run, however fast it copies.
		g := e.gateBig(t, fmt.Sprintf("NEW.id > %d", n/10))
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 1})
		addrA, addrB := freeAddr(t), freeAddr(t)

		a := startMigrate(t, "run", "-p", plan, "--json", "--instance", "a", "--metrics-addr", addrA)
		g.waitHeld(t, a, 1)
		tokA, _ := e.fence(t, "big", 0)
		m := scrape(t, addrA)
		wantMetric(t, m, `migrate_shard_state{plan="`+e.name+`",shard="0",state="running",table="big"}`, 1)
		wantMetric(t, m, `migrate_fence_token{plan="`+e.name+`",shard="0",table="big"}`, float64(tokA))
		wantMetric(t, m, `migrate_rows_written_total{plan="`+e.name+`",shard="0",table="big"}`, float64(n/10))

		b := startMigrate(t, "run", "-p", plan, "--json", "--instance", "b", "--metrics-addr", addrB)
		poll(t, 20*time.Second, "the standby's metrics", func() bool {
			m, err := get(addrB)
			return err == nil && regexp.MustCompile(`migrate_shard_state\{[^}]*state="standby"[^}]*\} 1`).MatchString(m)
		})
		a.kill(t)
		g.drop(t) // its batch at the gate ends with its connection, as a killed client's does
		g.openAll(t)
		var last string
		poll(t, 30*time.Second, "the standby's takeover in its metrics", func() bool {
			var err error
			last, err = get(addrB) // the takeover's series are set one after the other
			for _, name := range []string{"migrate_takeovers_total", "migrate_lease_expiry_reclaims_total", "migrate_last_rto_seconds", "migrate_predicted_rto_seconds"} {
				err = errors.Join(err, errIfMissing(last, name))
			}
			return err == nil
		})
		wantMetric(t, last, `migrate_lease_expiry_reclaims_total{plan="`+e.name+`",shard="0",table="big"}`, 1)
		wantMetric(t, last, `migrate_predicted_rto_seconds{plan="`+e.name+`",shard="0",table="big"}`, 2.2)
		if v := metric(t, last, `migrate_last_rto_seconds{plan="`+e.name+`",shard="0",table="big"}`); v < 1.5 || v > 10 {
			t.Errorf("last RTO %vs, want about the 2s TTL", v)
		}
		r := b.wait(t)
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		if len(rep.Takeovers) != 1 {
			t.Fatalf("takeovers %+v, want one", rep.Takeovers)
		}
		st := runMigrate(t, "status", "-p", plan, "--json")
		var status struct {
			Tables []struct {
				Takeovers    int64           `json:"takeovers"`
				LastTakeover json.RawMessage `json:"last_takeover"`
			} `json:"tables"`
		}
		decodeJSON(t, st, &status)
		var lt struct {
			Token int64 `json:"token"`
			RtoMs int64 `json:"rto_ms"`
		}
		if len(status.Tables) != 1 || status.Tables[0].Takeovers != 1 || json.Unmarshal(status.Tables[0].LastTakeover, &lt) != nil ||
			lt.Token != rep.Takeovers[0].Token || lt.RtoMs != rep.Takeovers[0].RtoMs {
			t.Errorf("status %+v, want 1 takeover with token %d and rto_ms %d", status, rep.Takeovers[0].Token, rep.Takeovers[0].RtoMs)
		}
		text := runMigrate(t, "status", "-p", plan)
		if want := fmt.Sprintf("%dms (predicted <= 2200ms)", rep.Takeovers[0].RtoMs); !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(text.stdout) {
			t.Errorf("status text lacks the last RTO %q:\n%s", want, text.stdout)
		}
	})
}

// TestTakeover_FrozenHolderRefused: a holder frozen (SIGSTOP) in the
// middle of a batch for longer than its lease is a zombie. The server ends
// its open transaction by the session's timeouts (F3), so a standby takes
// the shard over after the TTL, resumes where the holder last committed and
// finishes; the holder, woken (SIGCONT) after that, is refused (exit 4) and
// committed nothing after the takeover.
func TestTakeover_FrozenHolderRefused(t *testing.T) {
	t.Parallel()
	inDirections(t, directions, func(t *testing.T, e *env) {
		const n = 60000
		e.leaseTTL, e.batchSize = "2s", 1000
		seedBig(t, e, "big", n)
		// The holder is frozen while its batch after n/2 has written half
		// its rows and waits at the gate: mid-batch, inside its
		// transaction, however fast it copies.
		g := e.gateBig(t, fmt.Sprintf("NEW.id > %d", n/2+e.batchSize/2))
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})

		zombie := startMigrate(t, "run", "-p", plan, "--json", "--instance", "zombie")
		g.waitHeld(t, zombie, 1)
		tokZombie, ownerZombie := e.fence(t, "big", 0)
		signal(t, zombie, syscall.SIGSTOP)
		// The gate is the test's, not the server's: with it open the
		// frozen batch waits on its client, which only the server's
		// timeouts end.
		g.openAll(t)
		r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "successor")
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		if len(rep.Takeovers) != 1 {
			t.Fatalf("takeovers %+v, want exactly one\n%s", rep.Takeovers, r)
		}
		to := rep.Takeovers[0]
		// The frozen batch never committed: the successor resumes after the
		// batches before it.
		if to.PreviousOwner != ownerZombie || to.Token <= tokZombie || to.ResumeKey != fmt.Sprintf("[%d]", n/2) || to.ReplayedRows != 0 {
			t.Errorf("takeover %+v, want from %q with a token above %d, resumed at [%d], nothing replayed", to, ownerZombie, tokZombie, n/2)
		}
		if rep.RowsWritten != n/2 || rep.Verify == nil || !rep.Verify.Equal {
			t.Errorf("the successor wrote %d rows, verify %+v; want the %d after the zombie's last commit, and equal", rep.RowsWritten, rep.Verify, n/2)
		}

		signal(t, zombie, syscall.SIGCONT)
		z := zombie.wait(t)
		wantCode(t, z, 4)
		t.Logf("the woken zombie exited 4 after %v", z.elapsed.Round(time.Millisecond))
		ph := e.dst.ph
		mine := queryInt(t, e.dstDB, "SELECT count(*) FROM big WHERE id <= "+ph(1)+" AND _fence <> "+ph(2), n/2, tokZombie)
		theirs := queryInt(t, e.dstDB, "SELECT count(*) FROM big WHERE id > "+ph(1)+" AND _fence <> "+ph(2), n/2, to.Token)
		if mine != 0 || theirs != 0 {
			t.Errorf("%d rows up to the resume key without the zombie's token %d, %d after it without the successor's %d: want none",
				mine, tokZombie, theirs, to.Token)
		}
		if tok, owner := e.fence(t, "big", 0); tok != to.Token || !strings.HasPrefix(owner, "successor-") {
			t.Errorf("watermark %d of %q after the zombie woke, want the successor's %d", tok, owner, to.Token)
		}
		if cp := e.checkpoint(t, "big", 0); cp.state != "done" || cp.rowsDone != n || cp.token != to.Token {
			t.Errorf("checkpoint %+v, want done, %d rows, token %d", cp, n, to.Token)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

func errIfMissing(scraped, name string) error {
	if !regexp.MustCompile(`(?m)^` + name + `\{`).MatchString(scraped) {
		return fmt.Errorf("no %s", name)
	}
	return nil
}

// TestRun_ParallelShares runs two instances with --parallel 2 on an
// 8-shard table, the second started once the first is copying: each holds
// two shards at a time, so both write, and each shard exactly once.
//
// PostgreSQL to PostgreSQL only: how instances share shards is the leases'
// (Redis) business; TestRun_TwoInstances shares shards in both same-engine
// pairs, TestRun_ParallelAbsorbsKilled takes them over.
func TestRun_ParallelShares(t *testing.T) {
	t.Parallel()
	inDirections(t, []direction{pgToPG}, func(t *testing.T, e *env) {
		const n = 160000
		e.batchSize, e.leaseTTL = 500, "2s"
		seedBig(t, e, "big", n)
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 8})
		w, cut := twoShare(t, e, plan, n)
		// Every row version written, by committed and rolled-back
		// transactions: n, and no more than a batch for each attempt the
		// lease's runway cut (logged: a batch held at the gate for longer
		// than the runway while the second instance starts, on a busy
		// machine).
		if writes := w.settled(t, n); writes < n || writes > n+cut*int64(e.batchSize) {
			t.Errorf("the target saw %d row writes, want %d and at most a batch more for each of the %d attempts the runway cut: no shard is written twice", writes, n, cut)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
		wantCode(t, runMigrate(t, "run", "-p", plan, "--parallel", "-1"), 2)
	})
}

// twoShare runs two instances with --parallel 2 on plan's 8-shard table
// "big" of n rows (ids 1..n; n/8 a multiple of twice the batch size), the
// second started once the first is copying: both write, every shard once,
// no takeover. A gate in the target stops every shard in its middle: the
// first instance's two shards wait there until the second holds two of the
// others, so the first cannot have taken every shard before the second
// starts, however fast it copies. It returns the count of the row writes
// to "big" from before the first instance started, and how many batch
// attempts the lease's runway cut (rolled back and tried smaller, logged).
func twoShare(t *testing.T, e *env, plan string, n int64) (*writeCounter, int64) {
	t.Helper()
	per := n / 8 // shard i holds (i*per, (i+1)*per]
	g := e.gateBig(t, fmt.Sprintf("NEW.id %% %d > %d", per, per/2))
	w := e.countWrites(t, "big")
	a := startMigrate(t, "run", "-p", plan, "--json", "--instance", "a", "--parallel", "2")
	g.waitHeld(t, a, 2)
	b := startMigrate(t, "run", "-p", plan, "--json", "--instance", "b", "--parallel", "2")
	poll(t, 60*time.Second, "the second instance to hold two shards", func() bool {
		select {
		case <-b.done:
			t.Fatalf("the second instance exited before it held a shard:\n%s", b.wait(t))
		default:
		}
		return queryInt(t, e.dstDB, "SELECT count(*) FROM _migrate_fence WHERE plan = "+e.dst.ph(1)+" AND owner LIKE 'b-%'", e.name) == 2
	})
	g.openAll(t)
	var total, cut int64
	for _, p := range []*proc{a, b} {
		r := p.wait(t)
		wantCode(t, r, 0)
		cut += int64(strings.Count(r.stderr, "trying a smaller one"))
		var rep runReport
		decodeJSON(t, r, &rep)
		if rep.RowsWritten == 0 || len(rep.Shards) != 8 || len(rep.Takeovers) != 0 || rep.Parallel != 2 {
			t.Errorf("%v: wrote %d rows, shards %+v, takeovers %+v, parallel %d; want some rows, 8 shards, no takeover, 2", p.cmd.Args[1:], rep.RowsWritten, rep.Shards, rep.Takeovers, rep.Parallel)
		}
		total += rep.RowsWritten
	}
	if total != n {
		t.Errorf("the instances wrote %d rows together, want %d", total, n)
	}
	return w, cut
}

// TestRun_ParallelAbsorbsKilled: three instances share an 8-shard table
// with --parallel 2, all writing; one is killed and the other two take over
// the shards it held, after their TTL, and finish every shard.
//
// PostgreSQL to PostgreSQL only: which instance absorbs which shard is the
// leases' (Redis) business; several shards taken over at once from a
// killed holder is TestRun_ResumeShardsCompositeKey's in both same-engine
// pairs.
func TestRun_ParallelAbsorbsKilled(t *testing.T) {
	t.Parallel()
	inDirections(t, []direction{pgToPG}, func(t *testing.T, e *env) {
		const n = 240000
		e.batchSize, e.leaseTTL = 500, "2s"
		seedBig(t, e, "big", n)
		// Every shard stops in its middle at a gate until a is killed: a
		// certainly holds two shards then, however fast it copies, and they are
		// taken over. Its batches at the gate find their client gone once it opens.
		per := n / 8 // shard i holds (i*per, (i+1)*per]
		g := e.gateBig(t, fmt.Sprintf("NEW.id %% %d > %d", per, per/2))
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 8})

		a := startMigrate(t, "run", "-p", plan, "--json", "--instance", "a", "--parallel", "2")
		g.waitHeld(t, a, 2)
		b := startMigrate(t, "run", "-p", plan, "--json", "--instance", "b", "--parallel", "2")
		c := startMigrate(t, "run", "-p", plan, "--json", "--instance", "c", "--parallel", "2")
		poll(t, 20*time.Second, "three instances writing", func() bool {
			names := map[string]bool{} // the instance names in the owner ids
			for _, o := range e.fenceOwners(t) {
				names[strings.SplitN(o, "-", 2)[0]] = true
			}
			return len(names) == 3
		})
		if killed := a.kill(t); killed.code != -1 {
			t.Fatalf("a was not killed: %s", killed)
		}
		g.openAll(t)
		var takeovers int
		for _, p := range []*proc{b, c} {
			r := p.wait(t)
			wantCode(t, r, 0)
			var rep runReport
			decodeJSON(t, r, &rep)
			if len(rep.Shards) != 8 || rep.RowsWritten == 0 {
				t.Errorf("%v: shards %+v, %d rows; want 8 shards and some rows", p.cmd.Args[1:], rep.Shards, rep.RowsWritten)
			}
			for _, to := range rep.Takeovers {
				if !strings.HasPrefix(to.PreviousOwner, "a-") || to.ReplayedRows > int64(e.batchSize) {
					t.Errorf("takeover %+v: want one from a, at most one batch replayed", to)
				}
			}
			takeovers += len(rep.Takeovers)
		}
		if takeovers == 0 {
			t.Error("no takeover of the killed instance's shards")
		}
		if got := e.shardsDone(t); got != 8 {
			t.Errorf("%d shards done, want 8", got)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

// TestRun_ShardsAtQuantiles: a skewed key distribution (most keys dense, a
// few far away) still splits into shards of about the same number of rows,
// and a later run keeps the bounds the first one stored.
func TestRun_ShardsAtQuantiles(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		const n = 40000
		seedBig(t, e, "big", n)
		exec1(t, e.srcDB, "UPDATE big SET id = id * 1000000000 WHERE id > "+e.src.ph(1), n-100) // the last 100 keys far away
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 4})
		r := runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		if want := min(4, max(2, runtime.NumCPU())); rep.Parallel != want {
			t.Errorf("parallel %d without --parallel, want %d (4 shards, %d cores, connections to spare)", rep.Parallel, want, runtime.NumCPU())
		}
		bounds := func() string {
			var s []string
			for _, b := range queryStrings(t, e.dstDB, "SELECT lo_key, hi_key FROM _migrate_checkpoint WHERE plan = "+e.dst.ph(1)+" ORDER BY shard", e.name) {
				lo, hi, _ := strings.Cut(b, "|")
				s = append(s, strings.ReplaceAll(lo, "NULL", "-")+".."+strings.ReplaceAll(hi, "NULL", "-"))
			}
			return strings.Join(s, " ")
		}
		first := bounds()
		rows, err := e.dstDB.QueryContext(t.Context(), "SELECT shard, rows_done FROM _migrate_checkpoint WHERE plan = "+e.dst.ph(1)+" ORDER BY shard", e.name)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var shard, done int64
			if err := rows.Scan(&shard, &done); err != nil {
				t.Fatal(err)
			}
			if done < n/4-n/100 || done > n/4+n/100 {
				t.Errorf("shard %d holds %d rows, want about %d (bounds %s)", shard, done, n/4, first)
			}
		}
		wantCode(t, runMigrate(t, "run", "-p", plan, "--json"), 0)
		if again := bounds(); again != first {
			t.Errorf("bounds changed across runs: %s, then %s", first, again)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testsvc.FreePort(t)))
}

func get(addr string) (string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	res, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	m, err := get(addr)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	return m
}

// metric is the value of one series (name and labels as Prometheus
// writes them) in a scrape.
func metric(t *testing.T, scraped, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(scraped)
	if m == nil {
		t.Fatalf("no series %s in:\n%s", series, scraped)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func wantMetric(t *testing.T, scraped, series string, want float64) {
	t.Helper()
	if got := metric(t, scraped, series); got != want {
		t.Errorf("%s = %v, want %v", series, got, want)
	}
}
