package main_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/netfault"
	"github.com/migrate-dev/migrate/internal/testsvc"
)

// The soak (issue 8): instances of one plan copy a sharded table over and
// over while random faults hit them — SIGKILL, SIGSTOP past the TTL and
// short of it, network partitions of one instance from the target and
// Redis, and restarts of Redis without persistence — and new instances are
// started as others die. Each round ends when every shard is done; then the
// copy is verified and the next round copies into a fresh table.
//
// MIGRATE_SOAK sets the duration (default 45s, what CI runs); `make soak`
// runs 10 minutes on 2,000,000 rows (MIGRATE_SOAK_ROWS, default 300,000).
// MIGRATE_SOAK_REPORT names a file for the Markdown report (it is also
// logged).
//
// Pass: every round verifies clean, no write with a token below its shard's
// watermark was ever accepted (a statement trigger in the target records
// any), no takeover replayed more than one batch, and every instance ended
// with exit 0, 4 (fenced) or by our SIGKILL.
func TestSoak(t *testing.T) {
	t.Parallel()
	soakTest(t, 45*time.Second, 300000, false)
}

// soakTest runs a soak of dur on rows rows (the defaults of MIGRATE_SOAK and
// MIGRATE_SOAK_ROWS); with follow, under `run --follow` with an
// application writing to the source (soak_follow_test.go).
func soakTest(t *testing.T, dur time.Duration, rows int, follow bool) {
	if v := os.Getenv("MIGRATE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("MIGRATE_SOAK=%q: %v", v, err)
		}
		dur = d
	}
	if v := os.Getenv("MIGRATE_SOAK_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("MIGRATE_SOAK_ROWS=%q: want a number >= 1000", v)
		}
		rows = n
	}
	s := newSoak(t, rows)
	s.follow = follow
	start := time.Now()
	for round := 1; round == 1 || time.Since(start) < dur; round++ {
		s.round(t, round, start.Add(dur))
	}
	rep := s.report(time.Since(start))
	t.Log("\n" + rep)
	if f := os.Getenv("MIGRATE_SOAK_REPORT"); f != "" {
		if err := os.WriteFile(f, []byte(rep), 0o644); err != nil {
			t.Error(err)
		}
	}
	if s.stale != 0 {
		t.Errorf("%d stale writes accepted", s.stale)
	}
}

const (
	soakExitWait  = 3 * time.Minute // an instance's exit after its round
	soakTTL       = 2 * time.Second
	soakBatch     = 1000
	soakShards    = 8
	soakInstances = 3
	soakParallel  = 4
)

type soak struct {
	e      *env
	redis  *testsvc.RedisServer
	rows   int
	seq    int
	faults map[string]int
	exits  map[string]int
	rounds []soakRound
	rtos   []int64
	stale  int64 // writes accepted below the watermark
	// per takeover: the most rows replayed
	maxReplayed, takeovers, staleRejected int64
	follow                                bool
	nextID                                int64 // the application's next new key (follow)
}

type soakRound struct {
	n             int
	elapsed       time.Duration
	instances     int
	takeovers     int
	verifyEqual   bool
	staleAccepted int64
	stream        *soakStream // follow
}

// soakProc is one instance and its own proxies to the target and Redis.
type soakProc struct {
	name          string
	p             *proc
	target, redis *netfault.Proxy
	stopped       bool // SIGSTOPped by us
	killed        bool
}

func newSoak(t *testing.T, rows int) *soak {
	e := newEnv(t, pgEngine, pgEngine) // its stale-write detector is a PostgreSQL statement trigger
	e.batchSize, e.leaseTTL = soakBatch, soakTTL.String()
	// every fault is a takeover: never halt for too many of them
	e.extra = "max_takeovers: 100000\n"
	s := &soak{e: e, redis: testsvc.StartRedis(t, false), rows: rows, faults: map[string]int{}, exits: map[string]int{}}
	e.redisURL = s.redis.URL
	seedBig(t, e, "big", rows)
	// The stale-write detector: after each statement writing a target
	// table, rows whose token is below their shard's watermark right then
	// are recorded (in the writer's transaction: only if it commits).
	exec1(t, e.dstDB, `CREATE TABLE soak_stale (tbl text, id bigint, token bigint, watermark bigint, at timestamptz DEFAULT clock_timestamp())`)
	exec1(t, e.dstDB, `CREATE FUNCTION soak_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO soak_stale (tbl, id, token, watermark)
  SELECT TG_TABLE_NAME, n.id, n._fence, f.token
  FROM new_rows n
  JOIN _migrate_checkpoint c ON c.plan = TG_ARGV[0] AND c.tbl = TG_TABLE_NAME
    AND (c.lo_key IS NULL OR n.id > (c.lo_key::jsonb->>0)::bigint)
    AND (c.hi_key IS NULL OR n.id <= (c.hi_key::jsonb->>0)::bigint)
  JOIN _migrate_fence f ON f.plan = c.plan AND f.tbl = c.tbl AND f.shard = c.shard
  WHERE n._fence < f.token AND n._fence <> 0; -- 0: the change stream's writes, fenced by its own lease
  RETURN NULL;
END $$`)
	return s
}

// planFor writes a plan with the given target and Redis URLs ("": the
// soak's own, direct).
func (s *soak) planFor(t *testing.T, name, table, target, redis string) string {
	e := *s.e
	e.name = name
	if target != "" {
		e.dstURL, e.redisURL = target, redis
	}
	plan := e.plan(t, planTable{name: "big", target: table, key: []string{"id"}, shards: soakShards})
	s.e.plans = e.plans // the next plan gets a file of its own
	return plan
}

// start starts one more instance of the round's plan, with fresh proxies.
func (s *soak) start(t *testing.T, name, table string) *soakProc {
	t.Helper()
	s.seq++
	sp := &soakProc{name: fmt.Sprintf("i%d", s.seq)}
	var target, redis string
	sp.target, target = proxied(t, sp.name+"-pg", s.e.dstURL)
	sp.redis, redis = proxied(t, sp.name+"-redis", s.redis.URL)
	plan := s.planFor(t, name, table, target, redis)
	// Room for every shard on any two instances: a takeover waits for the
	// lease to expire, not for a free slot.
	args := []string{"run", "-p", plan, "--json", "--no-verify", "--instance", sp.name, "--parallel", strconv.Itoa(soakParallel)}
	if s.follow {
		args = append(args, "--follow")
	}
	sp.p = startMigrate(t, args...)
	return sp
}

func (sp *soakProc) exited() bool {
	select {
	case <-sp.p.done:
		return true
	default:
		return false
	}
}

func (sp *soakProc) signal(t *testing.T, sig syscall.Signal) {
	if err := sp.p.cmd.Process.Signal(sig); err != nil && !sp.exited() {
		t.Errorf("%s: signal %v: %v", sp.name, sig, err)
	}
}

// round copies the table once into big_r<n> under faults until every shard
// is done, then verifies it.
func (s *soak) round(t *testing.T, n int, deadline time.Time) {
	begin := time.Now()
	name := fmt.Sprintf("%s-r%d", s.e.name, n)
	table := fmt.Sprintf("big_r%d", n)
	exec1(t, s.e.dstDB, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, payload text, n integer, _fence bigint NOT NULL DEFAULT 0)`)
	for _, ev := range []string{"INSERT", "UPDATE"} {
		exec1(t, s.e.dstDB, fmt.Sprintf(`CREATE TRIGGER soak_%s AFTER %s ON %s REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION soak_check(%s)`,
			strings.ToLower(ev), ev, table, quoteLit(name)))
	}
	var live, all []*soakProc
	for range soakInstances {
		sp := s.start(t, name, table)
		live, all = append(live, sp), append(all, sp)
	}
	var app *soakApp
	if s.follow {
		app = s.startApp(t, name, table)
	}
	var polled time.Time
	done := false
	nextFault := time.Now().Add(jitter(1500*time.Millisecond, 3*time.Second))
	var undo func() // ends a fault in progress
	var undoAt time.Time
	for !done {
		time.Sleep(100 * time.Millisecond)
		if undo != nil && time.Now().After(undoAt) {
			undo()
			undo = nil
		}
		// Reap: exit 0 ends the round; anything else gets a replacement.
		var still []*soakProc
		for _, sp := range live {
			if !sp.exited() {
				still = append(still, sp)
				continue
			}
			code := sp.p.cmd.ProcessState.ExitCode()
			if code == 0 && !s.follow { // following, an instance exits at the cutover
				done = true
				continue
			}
			if !sp.killed && code != 4 && code != 0 {
				t.Errorf("round %d: %s exited %d:\n%s", n, sp.name, code, tail(sp.p.stderr.String(), 20))
			}
			sp2 := s.start(t, name, table)
			still, all = append(still, sp2), append(all, sp2)
		}
		live = still
		// Following, a round goes on with faults after the copy (its
		// stream's holder among their targets) for soakFollowRound.
		if s.follow && time.Since(polled) > time.Second && time.Since(begin) > soakFollowRound {
			polled = time.Now()
			done = s.copyDone(t, name, table)
		}
		if done || undo != nil || time.Now().Before(nextFault) || time.Now().After(deadline) && n > 1 {
			continue
		}
		undo, undoAt = s.fault(t, live)
		nextFault = undoAt.Add(jitter(1500*time.Millisecond, 3*time.Second))
	}
	if undo != nil {
		undo()
	}
	// The others finish too: every shard is done.
	for _, sp := range live {
		if sp.stopped {
			sp.signal(t, syscall.SIGCONT)
		}
	}
	rd := soakRound{n: n, instances: len(all)}
	if s.follow {
		rd.stream = s.cutover(t, name, table, app)
	}
	for _, sp := range all {
		select { // a soak's instance may live longer than processTimeout
		case <-sp.p.done:
		case <-time.After(soakExitWait):
			t.Fatalf("round %d: %s still running %v after the round ended:\n%s", n, sp.name, soakExitWait, tail(sp.p.stderr.String(), 20))
		}
		r := result{code: sp.p.cmd.ProcessState.ExitCode(), stdout: sp.p.stdout.String(), stderr: sp.p.stderr.String()}
		if dir := os.Getenv("MIGRATE_SOAK_LOGS"); dir != "" { // each instance's log, to read after a failure
			_ = os.WriteFile(fmt.Sprintf("%s/r%d-%s.log", dir, n, sp.name), []byte(r.stderr), 0o644)
		}
		code := r.code
		if sp.killed {
			code = -9
		}
		s.exits[strconv.Itoa(code)]++
		if code != 0 && code != 4 && code != -9 {
			t.Errorf("round %d: %s exited %d:\n%s", n, sp.name, r.code, tail(r.stderr, 20))
		}
		var rep runReport
		if json.Unmarshal([]byte(r.stdout), &rep) != nil {
			continue // killed: no report
		}
		s.staleRejected += int64(rep.StaleRejections)
		for _, to := range rep.Takeovers {
			rd.takeovers++
			s.takeovers++
			s.rtos = append(s.rtos, to.RtoMs)
			s.maxReplayed = max(s.maxReplayed, to.ReplayedRows)
			if to.ReplayedRows > soakBatch {
				t.Errorf("round %d: takeover %+v replayed more than one batch", n, to)
			}
		}
	}
	rd.elapsed = time.Since(begin)
	direct := s.planFor(t, name, table, "", "")
	v := runMigrate(t, "verify", "-p", direct)
	rd.verifyEqual = v.code == 0
	if v.code != 0 {
		t.Errorf("round %d: verify exit %d:\n%s\n%s", n, v.code, v.stdout, v.stderr)
	}
	rd.staleAccepted = queryInt(t, s.e.dstDB, `SELECT count(*) FROM soak_stale WHERE tbl = $1`, table)
	s.stale += rd.staleAccepted
	s.rounds = append(s.rounds, rd)
	exec1(t, s.e.dstDB, `DROP TABLE `+table) // keep the target small over a long soak
}

// fault injects one random fault and returns how to end it and when.
func (s *soak) fault(t *testing.T, live []*soakProc) (func(), time.Time) {
	if len(live) == 0 {
		return nil, time.Now()
	}
	sp := live[rand.IntN(len(live))]
	kinds := []string{"kill", "pause", "short-pause", "partition", "redis-restart"}
	kind := kinds[rand.IntN(len(kinds))]
	s.faults[kind]++
	t.Logf("%s: %s on %s", time.Now().UTC().Format("15:04:05.000"), kind, sp.name)
	now := time.Now()
	switch kind {
	case "kill":
		sp.killed = true
		sp.signal(t, syscall.SIGKILL)
		return func() {}, now
	case "pause": // past the TTL: its leases expire, standbys take over
		sp.stopped = true
		sp.signal(t, syscall.SIGSTOP)
		return func() { sp.signal(t, syscall.SIGCONT); sp.stopped = false }, now.Add(soakTTL + jitter(300*time.Millisecond, 1500*time.Millisecond))
	case "short-pause": // shorter than what a lease tolerates: no takeover needed
		sp.stopped = true
		sp.signal(t, syscall.SIGSTOP)
		return func() { sp.signal(t, syscall.SIGCONT); sp.stopped = false }, now.Add(soakTTL / 4)
	case "partition":
		if err := sp.target.Cut(); err != nil {
			t.Error(err)
		}
		if err := sp.redis.Cut(); err != nil {
			t.Error(err)
		}
		return func() {
			if err := sp.target.Heal(); err != nil {
				t.Error(err)
			}
			if err := sp.redis.Heal(); err != nil {
				t.Error(err)
			}
		}, now.Add(soakTTL + jitter(300*time.Millisecond, 1500*time.Millisecond))
	default: // redis-restart, without persistence: leases and counters lost (L4)
		s.redis.Restart()
		return func() {}, now
	}
}

func (s *soak) report(elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## soak: %v, %d rows in %d shards, lease TTL %v, batch %d, %d instances kept alive, --parallel %d\n\n",
		elapsed.Round(time.Second), s.rows, soakShards, soakTTL, soakBatch, soakInstances, soakParallel)
	fmt.Fprintf(&b, "| round | time | instances started | takeovers | verify | stale writes accepted |\n|---:|---:|---:|---:|---|---:|\n")
	for _, r := range s.rounds {
		v := "clean"
		if !r.verifyEqual {
			v = "DIFFERENCES"
		}
		fmt.Fprintf(&b, "| %d | %v | %d | %d | %s | %d |\n", r.n, r.elapsed.Round(100*time.Millisecond), r.instances, r.takeovers, v, r.staleAccepted)
	}
	var kinds []string
	total := 0
	for k, n := range s.faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		total += n
	}
	slices.Sort(kinds)
	fmt.Fprintf(&b, "\nfaults injected: %d (%s)\n", total, strings.Join(kinds, ", "))
	var exits []string
	for k, n := range s.exits {
		label, ok := map[string]string{"0": "0 (done)", "4": "4 (fenced)", "-9": "SIGKILLed"}[k]
		if !ok {
			label = k
		}
		exits = append(exits, fmt.Sprintf("%s: %d", label, n))
	}
	slices.Sort(exits)
	fmt.Fprintf(&b, "instance exits: %s\n", strings.Join(exits, ", "))
	fmt.Fprintf(&b, "takeovers: %d; most rows replayed by one takeover: %d (batch %d); stale batches refused by the fence: %d; stale writes accepted: %d\n",
		s.takeovers, s.maxReplayed, soakBatch, s.staleRejected, s.stale)
	if s.follow {
		s.reportStream(&b)
	}
	if len(s.rtos) > 0 {
		r := slices.Clone(s.rtos)
		slices.Sort(r)
		q := func(p float64) int64 { return r[min(len(r)-1, int(p*float64(len(r))))] }
		fmt.Fprintf(&b, "RTO ms: min %d, median %d, p95 %d, max %d (predicted TTL + TTL/10 = %d)\n",
			r[0], q(0.5), q(0.95), r[len(r)-1], (soakTTL + soakTTL/10).Milliseconds())
	}
	return b.String()
}

func jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rand.Int64N(int64(hi-lo)))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
