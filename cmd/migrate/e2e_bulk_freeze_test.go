package main_test

import (
	"database/sql"
	"syscall"
	"testing"
	"time"
)

// A holder frozen (SIGSTOP) in the middle of sending a large batch's rows
// to the target, lease_ttl 3s; the batch's transaction holds the shard's
// watermark row locked meanwhile.
//
// MySQL, in a LOAD DATA LOCAL INFILE (issue 12, item 5): the server waited
// net_read_timeout (30 s by default) for the file's next bytes before
// ending it, and the successor's claims failed with lock wait timeouts
// (1205), counted as failures. Now the transaction's bounds include
// net_read_timeout, and a claim that meets a lock wait keeps waiting.
//
// PostgreSQL, in a COPY … FROM STDIN: the server does not act on
// statement_timeout while it waits for COPY data, so the successor waited
// for as long as the holder stayed frozen. Now the successor ends the
// sessions that hold the watermark row before it claims (fence.Break).
//
// Either way the successor claims the shard within TTL + a few seconds of
// the freeze, and the holder, woken, is refused.
func TestBulkLoad_FrozenHolderMidStream(t *testing.T) {
	for _, dst := range []*engine{mysqlEngine, pgEngine} {
		t.Run(dst.name, func(t *testing.T) {
			t.Parallel()
			frozenHolder(t, dst)
		})
	}
}

func frozenHolder(t *testing.T, dst *engine) {
	const ttl = 3 * time.Second
	e := newEnv(t, pgEngine, dst)
	e.leaseTTL = "3s"
	const n = 4000 // rows of 16 KB: a batch of 1000 is 16 MB of data
	exec1(t, e.srcDB, `CREATE TABLE big (id bigint PRIMARY KEY, payload text NOT NULL)`)
	exec1(t, e.srcDB, `INSERT INTO big SELECT g, repeat(md5(g::text), 512) FROM generate_series(1, $1::int) g`, n)
	plan := e.plan(t, planTable{name: "big", key: []string{"id"}})

	holder := startMigrate(t, "run", "-p", plan, "--instance", "holder")
	var frozenAt time.Time
	for attempt := 0; frozenAt.IsZero(); attempt++ {
		if attempt == 20 {
			t.Fatalf("never caught the holder inside a bulk load reading its data\n%s", holder.stderr.String())
		}
		id := waitBulkLoad(t, e, holder)
		signal(t, holder, syscall.SIGSTOP)
		stopped := time.Now()
		// Still in the statement a while after the freeze, and not done
		// with it: the server waits for the data's next bytes.
		time.Sleep(500 * time.Millisecond)
		if bulkLoadRunning(t, e, id) {
			frozenAt = stopped
			break
		}
		signal(t, holder, syscall.SIGCONT) // the data had been sent: try the next batch
	}
	standby := startMigrate(t, "run", "-p", plan, "--instance", "standby", "--json")
	claimed := time.Time{}
	deadline := frozenAt.Add(ttl + 15*time.Second)
	for claimed.IsZero() && time.Now().Before(deadline) {
		var tok int64
		err := e.dstDB.QueryRowContext(t.Context(), `SELECT token FROM _migrate_fence WHERE plan = `+e.dst.ph(1)+` AND tbl = 'big' AND shard = 0`, e.name).Scan(&tok)
		if err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		if tok > 1 {
			claimed = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if claimed.IsZero() {
		t.Fatalf("the standby had not claimed the shard %v after the freeze\n%s", time.Since(frozenAt).Round(time.Millisecond), standby.stderr.String())
	}
	took := claimed.Sub(frozenAt)
	t.Logf("MEASURED: the standby claimed the shard %v after the holder froze inside a bulk load into %s (lease_ttl %v)", took.Round(time.Millisecond), dst.name, ttl)
	if took > ttl+5*time.Second {
		t.Errorf("the standby claimed the shard %v after the freeze, want within lease_ttl %v + 5s", took.Round(time.Millisecond), ttl)
	}
	r := standby.wait(t)
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	if rep.Verify == nil || !rep.Verify.Equal {
		t.Errorf("verification %+v, want equal", rep.Verify)
	}
	signal(t, holder, syscall.SIGCONT)
	if h := holder.wait(t); h.code != 4 {
		t.Errorf("the woken holder: want exit 4 (fenced), got %s", h)
	}
	if k := queryInt(t, e.dstDB, `SELECT count(*) FROM big`); k != n {
		t.Errorf("target has %d rows, want %d", k, n)
	}
}

// bulkLoadQuery lists the connections of the target's database, besides
// its own, that run a batch's bulk load: MySQL's LOAD DATA, or
// PostgreSQL's COPY … FROM STDIN, still active.
func bulkLoadQuery(e *env) string {
	if e.dst == mysqlEngine {
		return `SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID() AND info LIKE 'LOAD DATA%'`
	}
	return `SELECT pid AS id FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND query LIKE 'COPY%FROM STDIN%' AND state = 'active'`
}

// waitBulkLoad waits for a bulk load in the target's database and returns
// its connection id.
func waitBulkLoad(t *testing.T, e *env, p *proc) int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var id int64
		err := e.dstDB.QueryRowContext(t.Context(), bulkLoadQuery(e)+` LIMIT 1`).Scan(&id)
		if err == nil {
			return id
		}
		if err != sql.ErrNoRows {
			t.Fatal(err)
		}
		select {
		case <-p.done:
			t.Fatalf("migrate exited before a bulk load was seen:\n%s", p.wait(t))
		case <-time.After(2 * time.Millisecond):
		}
	}
	t.Fatalf("no bulk load within 60s\n%s", p.stderr.String())
	return 0
}

// bulkLoadRunning reports whether connection id still runs its bulk load.
func bulkLoadRunning(t *testing.T, e *env, id int64) bool {
	t.Helper()
	var k int64
	q := `SELECT count(*) FROM (` + bulkLoadQuery(e) + `) l WHERE l.id = ` + e.dst.ph(1)
	if err := e.dstDB.QueryRowContext(t.Context(), q, id).Scan(&k); err != nil {
		t.Fatal(err)
	}
	return k > 0
}

func signal(t *testing.T, p *proc, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v: %v", sig, err)
	}
}
