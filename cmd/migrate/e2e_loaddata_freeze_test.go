package main_test

import (
	"database/sql"
	"syscall"
	"testing"
	"time"
)

// A holder frozen (SIGSTOP) in the middle of a large LOAD DATA LOCAL INFILE
// into a MySQL target, lease_ttl 3s (issue 12, item 5). Its transaction holds
// the shard's watermark row locked, and the server waited net_read_timeout
// (30 s by default) for the file's next bytes before ending it; the
// successor's claims failed with lock wait timeouts (1205), counted as
// failures. Now the transaction's bounds include net_read_timeout, and a
// claim that meets a lock wait keeps waiting: the successor claims the shard
// within TTL + a few seconds of the freeze, and the holder, woken, is
// refused.
func TestLoadData_FrozenHolderMidStream(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	e := newEnv(t, pgEngine, mysqlEngine)
	e.leaseTTL = "3s"
	const n = 4000 // rows of 16 KB: a batch of 1000 is a 16 MB file
	exec1(t, e.srcDB, `CREATE TABLE big (id bigint PRIMARY KEY, payload text NOT NULL)`)
	exec1(t, e.srcDB, `INSERT INTO big SELECT g, repeat(md5(g::text), 512) FROM generate_series(1, $1::int) g`, n)
	plan := e.plan(t, planTable{name: "big", key: []string{"id"}})

	holder := startMigrate(t, "run", "-p", plan, "--instance", "holder")
	var frozenAt time.Time
	for attempt := 0; frozenAt.IsZero(); attempt++ {
		if attempt == 20 {
			t.Fatalf("never caught the holder inside a LOAD DATA reading its file\n%s", holder.stderr.String())
		}
		id := waitLoadData(t, e.dstDB, holder)
		signal(t, holder, syscall.SIGSTOP)
		stopped := time.Now()
		// Still in the statement a while after the freeze, and not done
		// with it: the server waits for the file's next bytes.
		time.Sleep(500 * time.Millisecond)
		if loadDataRunning(t, e.dstDB, id) {
			frozenAt = stopped
			break
		}
		signal(t, holder, syscall.SIGCONT) // the file had been sent: try the next batch
	}
	standby := startMigrate(t, "run", "-p", plan, "--instance", "standby", "--json")
	claimed := time.Time{}
	deadline := frozenAt.Add(ttl + 15*time.Second)
	for claimed.IsZero() && time.Now().Before(deadline) {
		var tok int64
		err := e.dstDB.QueryRowContext(t.Context(), `SELECT token FROM _migrate_fence WHERE plan = ? AND tbl = 'big' AND shard = 0`, e.name).Scan(&tok)
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
	t.Logf("MEASURED: the standby claimed the shard %v after the holder froze inside LOAD DATA (lease_ttl %v)", took.Round(time.Millisecond), ttl)
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

// waitLoadData waits for a LOAD DATA statement in the target's database
// and returns its connection id.
func waitLoadData(t *testing.T, db *sql.DB, p *proc) int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var id int64
		err := db.QueryRowContext(t.Context(), `SELECT id FROM information_schema.processlist
WHERE db = DATABASE() AND id <> CONNECTION_ID() AND info LIKE 'LOAD DATA%' LIMIT 1`).Scan(&id)
		if err == nil {
			return id
		}
		if err != sql.ErrNoRows {
			t.Fatal(err)
		}
		select {
		case <-p.done:
			t.Fatalf("migrate exited before a LOAD DATA was seen:\n%s", p.wait(t))
		case <-time.After(2 * time.Millisecond):
		}
	}
	t.Fatalf("no LOAD DATA within 60s\n%s", p.stderr.String())
	return 0
}

// loadDataRunning reports whether connection id still runs its LOAD DATA.
func loadDataRunning(t *testing.T, db *sql.DB, id int64) bool {
	t.Helper()
	var k int64
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM information_schema.processlist WHERE id = ? AND info LIKE 'LOAD DATA%'`, id).Scan(&k); err != nil {
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
