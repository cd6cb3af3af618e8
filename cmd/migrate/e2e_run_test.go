package main_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runReport is the part of `run --json` (SPEC §4) the tests read.
type runReport struct {
	Plan            string `json:"plan"`
	Owner           string `json:"owner"`
	RowsWritten     int64  `json:"rows_written"`
	Batches         int    `json:"batches"`
	StaleRejections int    `json:"stale_rejections"`
	Parallel        int    `json:"parallel"`
	Takeovers       []struct {
		Table         string `json:"table"`
		Shard         int    `json:"shard"`
		Token         int64  `json:"token"`
		PreviousOwner string `json:"previous_owner"`
		RtoMs         int64  `json:"rto_ms"`
		PredictedMs   int64  `json:"predicted_rto_ms"`
		PreviousToken int64  `json:"previous_token"`
		ResumeKey     string `json:"resume_key"`
		WaitMs        int64  `json:"wait_ms"`
		ReplayedRows  int64  `json:"replayed_rows"`
		VerifyMs      int64  `json:"verify_ms"`
		CheckedRows   int64  `json:"checked_rows"`
		CheckDiffs    int64  `json:"check_differences"`
	} `json:"takeovers"`
	Shards []struct {
		Table string `json:"table"`
		Shard int    `json:"shard"`
		State string `json:"state"`
		Token int64  `json:"token"`
		Rows  int64  `json:"rows"`
	} `json:"shards"`
	Verify *struct {
		Equal  bool `json:"equal"`
		Tables []struct {
			Table      string `json:"table"`
			SourceRows int64  `json:"source_rows"`
			TargetRows int64  `json:"target_rows"`
			Missing    int64  `json:"missing"`
			Extra      int64  `json:"extra"`
			Changed    int64  `json:"changed"`
		} `json:"tables"`
	} `json:"verify"`
}

// decodeJSON decodes stdout, which must be exactly one JSON object, into v.
func decodeJSON(t *testing.T, r result, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, r)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value\n%s", r)
	}
}

// requireKeys fails unless obj (a JSON object) has every key.
func requireKeys(t *testing.T, where string, obj any, keys ...string) map[string]any {
	t.Helper()
	m, ok := obj.(map[string]any)
	if !ok {
		t.Fatalf("%s: want a JSON object, got %T (%v)", where, obj, obj)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: key %q missing (have %v)", where, k, keysOf(m))
		}
	}
	return m
}

// requireList fails unless obj[key] is a JSON array, and returns it.
func requireList(t *testing.T, where string, obj map[string]any, key string) []any {
	t.Helper()
	l, ok := obj[key].([]any)
	if !ok {
		t.Fatalf("%s: %q is %T (%v), want an array", where, key, obj[key], obj[key])
	}
	return l
}

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// columnTypes lists a table's columns and types in order, as PostgreSQL
// formats them.
func columnTypes(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	return strings.Join(cols, ", ")
}

func TestRun_FullCopy(t *testing.T) {
	t.Parallel()
	// PostgreSQL to PostgreSQL: the target's column types must be the
	// source's exactly; the mapping across engines is the conformance
	// suite's (full_copy, type_mapping).
	e := newEnv(t, pgEngine, pgEngine)
	const nItems = 20000
	seedItems(t, e.srcDB, "items", nItems)
	nEvents := seedEvents(t, e, 40, 150)
	eventCols := []string{"tenant", "code", "note", "at"}
	plan := e.plan(t,
		planTable{name: "items", key: []string{"id"}},
		planTable{name: "public.events", target: "events_copy", key: []string{"tenant", "code"}, columns: eventCols, shards: 3})

	r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "e2e-full")
	wantCode(t, r, 0)
	t.Logf("full copy of %d rows took %v", nItems+nEvents, r.elapsed.Round(time.Millisecond))

	var raw map[string]any
	decodeJSON(t, r, &raw)
	requireKeys(t, "run --json", raw, "plan", "rows_written", "batches", "stale_rejections", "takeovers", "verify")
	requireList(t, "run --json", raw, "takeovers")
	v := requireKeys(t, "run --json verify", raw["verify"], "equal", "tables")
	for i, tb := range requireList(t, "run --json verify", v, "tables") {
		requireKeys(t, fmt.Sprintf("verify.tables[%d]", i), tb, "table", "source_rows", "target_rows", "missing", "extra", "changed", "samples")
	}

	var rep runReport
	decodeJSON(t, r, &rep)
	if rep.Plan != e.name || rep.RowsWritten != nItems+nEvents || rep.StaleRejections != 0 || len(rep.Takeovers) != 0 {
		t.Errorf("plan %q rows_written %d stale_rejections %d takeovers %d; want %q, %d, 0, 0",
			rep.Plan, rep.RowsWritten, rep.StaleRejections, len(rep.Takeovers), e.name, nItems+nEvents)
	}
	if min := nItems/e.batchSize + 3; rep.Batches < min {
		t.Errorf("batches %d, want at least %d", rep.Batches, min)
	}
	if rep.Verify == nil || !rep.Verify.Equal || len(rep.Verify.Tables) != 2 {
		t.Fatalf("verify: %+v, want equal over 2 tables", rep.Verify)
	}
	if len(rep.Shards) != 4 {
		t.Errorf("shards: %+v, want 1 of items and 3 of events", rep.Shards)
	}
	for _, s := range rep.Shards {
		if s.State != "done" || s.Token <= 0 {
			t.Errorf("shard %s#%d: state %q token %d, want done with a token", s.Table, s.Shard, s.State, s.Token)
		}
	}

	// The target, by SQL: same rows, same types (C4 created the tables).
	assertSameRows(t, e, "items", "items", itemsColumns, []string{"id"}, nItems)
	assertSameRows(t, e, "events", "events_copy", pick(eventsSpec().cols, eventCols...), []string{"tenant", "code"}, nEvents)
	if got, want := columnTypes(t, e.dstDB, "items"), columnTypes(t, e.srcDB, "items")+", _fence bigint"; got != want {
		t.Errorf("target items columns\n got %s\nwant %s", got, want)
	}
	if got := columnTypes(t, e.dstDB, "events_copy"); got != "tenant integer, code text, note text, at timestamp with time zone, _fence bigint" {
		t.Errorf("target events_copy columns: %s", got)
	}
	var sum int64
	for i := range 3 {
		cp := e.checkpoint(t, "events_copy", i)
		if cp.state != "done" || cp.rowsDone == 0 {
			t.Errorf("events_copy#%d checkpoint %+v, want done with rows (the 3 shards split 40 tenants)", i, cp)
		}
		sum += cp.rowsDone
	}
	if sum != nEvents {
		t.Errorf("events_copy shards hold %d rows done, want %d", sum, nEvents)
	}
	if cp := e.checkpoint(t, "items", 0); cp.state != "done" || cp.rowsDone != nItems {
		t.Errorf("items checkpoint %+v, want done with %d rows", cp, nItems)
	}
}

// TestRun_ResumeAfterSIGKILL: a holder killed in the middle of a batch is
// taken over after its TTL; the successor resumes at the checkpoint, checks
// the neighbourhood and wastes at most the rows of the cut batch. In the
// two same-engine pairs; the cross pairs' takeover after SIGKILL is the
// conformance suite's sigkill_resume (the same kill at a gate, on a
// smaller table).
func TestRun_ResumeAfterSIGKILL(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		const n = 200000
		e.leaseTTL, e.batchSize = "2s", 1000
		seedBig(t, e, "big", n)
		// The holder is killed mid-run, however fast it copies: its batch after
		// n/2 has written half its rows and waits at the gate.
		g := e.gateBig(t, fmt.Sprintf("NEW.id > %d", n/2+e.batchSize/2))
		w := e.countWrites(t, "big")
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})

		first := startMigrate(t, "run", "-p", plan, "--json", "--instance", "victim")
		g.waitHeld(t, first, 1)
		killed := first.kill(t)
		if killed.code != -1 {
			t.Fatalf("the first run was not killed by the signal: %s", killed)
		}
		g.drop(t) // its batch at the gate ends with its connection, as a killed client's does
		g.openAll(t)
		before := e.checkpoint(t, "big", 0)
		tokBefore, ownerBefore := e.fence(t, "big", 0)
		t.Logf("killed the holder at the gate (checkpoint after the kill: %d, token %d)", before.rowsDone, tokBefore)
		if before.rowsDone != n/2 || before.state != "running" {
			t.Fatalf("checkpoint %+v at the kill, want running with the %d rows before the gate", before, n/2)
		}

		r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "survivor")
		wantCode(t, r, 0)
		var raw map[string]any
		decodeJSON(t, r, &raw)
		for i, to := range requireList(t, "run --json", raw, "takeovers") {
			requireKeys(t, fmt.Sprintf("takeovers[%d]", i), to, "table", "shard", "token", "previous_owner",
				"wait_ms", "elect_ms", "recover_ms", "verify_ms", "rto_ms", "replayed_rows")
		}
		var rep runReport
		decodeJSON(t, r, &rep)
		if len(rep.Takeovers) != 1 {
			t.Fatalf("takeovers %+v, want exactly one\n%s", rep.Takeovers, r)
		}
		to := rep.Takeovers[0]
		if to.Table != "big" || to.Shard != 0 || to.PreviousOwner != ownerBefore || to.Token <= tokBefore {
			t.Errorf("takeover %+v, want big#0 from %q with a token above %d", to, ownerBefore, tokBefore)
		}
		if to.ReplayedRows > int64(e.batchSize) {
			t.Errorf("takeover replayed %d rows, want at most one batch (%d)", to.ReplayedRows, e.batchSize)
		}
		if rep.RowsWritten != n-before.rowsDone {
			t.Errorf("second run wrote %d rows, want the %d left after the checkpoint", rep.RowsWritten, n-before.rowsDone)
		}
		if rep.Verify == nil || !rep.Verify.Equal {
			t.Errorf("verify %+v, want equal", rep.Verify)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
		// The takeover checked the last committed batch before the resume point
		// and the first new one.
		if to.CheckedRows != 2*int64(e.batchSize) || to.CheckDiffs != 0 {
			t.Errorf("takeover checked %d rows with %d differences, want the %d rows of the last committed and the first new batch, none different", to.CheckedRows, to.CheckDiffs, 2*e.batchSize)
		}
		if to.RtoMs < to.WaitMs+to.VerifyMs {
			t.Errorf("rto_ms %d < wait_ms %d + verify_ms %d", to.RtoMs, to.WaitMs, to.VerifyMs)
		}
		if to.PredictedMs != 2200 || to.PreviousToken != tokBefore || to.ResumeKey != fmt.Sprintf("[%d]", before.rowsDone) {
			t.Errorf("takeover predicted_rto_ms %d previous_token %d resume_key %q, want 2200 (TTL + TTL/10), %d, [%d]",
				to.PredictedMs, to.PreviousToken, to.ResumeKey, tokBefore, before.rowsDone)
		}
		if cp := e.checkpoint(t, "big", 0); cp.state != "done" || cp.rowsDone != n || cp.token != to.Token {
			t.Errorf("checkpoint %+v, want done, %d rows, token %d", cp, n, to.Token)
		}
		if tok, owner := e.fence(t, "big", 0); tok != to.Token || owner == ownerBefore {
			t.Errorf("watermark token %d owner %q, want %d of the survivor", tok, owner, to.Token)
		}

		// Waste, measured by the target itself: every row version written to the
		// table, by committed and rolled-back transactions of both runs, less the
		// rows that had to be written once.
		writes := w.settled(t, n)
		wasted := writes - n
		t.Logf("MEASURED: wasted rows = row writes (%d) - N (%d) = %d (batch_size %d); takeover replayed_rows = %d, rto_ms = %d (wait_ms %d)",
			writes, n, wasted, e.batchSize, to.ReplayedRows, to.RtoMs, to.WaitMs)
		// Each attempt at the batch by the killed holder wrote its first half
		// and waited at the gate: the last one was cut by the kill, any before
		// it by the lease's runway (logged), all rolled back.
		attempts := 1 + int64(strings.Count(killed.stderr, "trying a smaller one")+strings.Count(killed.stderr, "batch failed, retrying"))
		if wasted != attempts*int64(e.batchSize/2) {
			t.Errorf("%d rows written beyond the %d needed; want the %d of each of the %d attempts at the batch the kill cut (half a batch of %d each)",
				wasted, n, e.batchSize/2, attempts, e.batchSize)
		}
	})
}

// TestRun_ResumeShardsCompositeKey kills a holder of three shards of a
// table with an (integer, text) key; the next run takes over every shard and
// resumes each after its decoded checkpoint key.
func TestRun_ResumeShardsCompositeKey(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		e.leaseTTL, e.batchSize = "2s", 1000
		n := seedEvents(t, e, 200, 1000)
		events := eventsSpec()
		cols, key := events.cols, events.key
		// The shards split the tenants at about 67 and 134, a batch is one
		// tenant's 1000 codes: every shard waits at the first tenant past a
		// third of its range (34, 101, 168) when the holder is killed.
		g := e.gateTable(t, events, "NEW.tenant % 67 > 33")
		w := e.countWrites(t, "events")
		plan := e.plan(t, planTable{name: "events", key: key, shards: 3})

		first := startMigrate(t, "run", "-p", plan, "--instance", "victim", "--parallel", "3")
		g.waitHeld(t, first, 3)
		first.kill(t)
		g.drop(t) // their batches at the gate end with the connections, as a killed client's do
		g.openAll(t)
		var doneBefore int64
		tokens := map[int]int64{}
		for i := range 3 {
			cp := e.checkpoint(t, "events", i)
			if cp.state == "done" || cp.rowsDone == 0 {
				t.Fatalf("shard %d checkpoint %+v at the kill, want every shard part-way", i, cp)
			}
			doneBefore += cp.rowsDone
			tokens[i], _ = e.fence(t, "events", i)
		}

		r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "survivor")
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		if len(rep.Takeovers) != 3 {
			t.Fatalf("takeovers %+v, want one per shard\n%s", rep.Takeovers, r)
		}
		var replayed int64
		for _, to := range rep.Takeovers {
			if !strings.HasPrefix(to.PreviousOwner, "victim-") || to.Token <= tokens[to.Shard] {
				t.Errorf("takeover %+v, want from victim with a token above %d", to, tokens[to.Shard])
			}
			replayed += to.ReplayedRows
		}
		if rep.RowsWritten != n-doneBefore {
			t.Errorf("second run wrote %d rows, want the %d left after the checkpoints", rep.RowsWritten, n-doneBefore)
		}
		assertSameRows(t, e, "events", "events", cols, key, n)
		writes := w.settled(t, n)
		t.Logf("MEASURED (3 shards): wasted rows = %d - %d = %d (at most one batch per shard: %d); replayed_rows = %d",
			writes, n, writes-n, 3*e.batchSize, replayed)
		if writes-n > int64(3*e.batchSize) || replayed > int64(3*e.batchSize) {
			t.Errorf("wasted %d, replayed %d rows: want at most one batch per shard", writes-n, replayed)
		}
	})
}

func TestRun_FinishedPlanExitsQuickly(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		const n = 5000
		seedBig(t, e, "big", n)
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 2})
		wantCode(t, runMigrate(t, "run", "-p", plan), 0)

		r := runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		if rep.RowsWritten != 0 || rep.Batches != 0 || len(rep.Takeovers) != 0 {
			t.Errorf("second run: rows_written %d batches %d takeovers %d, want nothing done", rep.RowsWritten, rep.Batches, len(rep.Takeovers))
		}
		if len(rep.Shards) != 2 {
			t.Errorf("shards %+v, want 2", rep.Shards)
		}
		for _, s := range rep.Shards {
			if s.State != "done" {
				t.Errorf("shard %s#%d state %q, want done", s.Table, s.Shard, s.State)
			}
		}
		// A finished plan needs no lease: well under the 30s TTL a wait would take.
		if r.elapsed > 10*time.Second {
			t.Errorf("second run took %v", r.elapsed)
		}
		t.Logf("second run of a finished plan took %v", r.elapsed.Round(time.Millisecond))
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

// pick is the columns of cols named names, in their order.
func pick(cols []col, names ...string) []col {
	var out []col
	for _, n := range names {
		for _, c := range cols {
			if c.name == n {
				out = append(out, c)
			}
		}
	}
	return out
}

func TestRun_ExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknownKey := write("unknown.yaml", "name: p1\nsource: postgres://u@127.0.0.1:1/s\nbatchsize: 10\ntarget: postgres://u@127.0.0.1:1/t\nredis: redis://127.0.0.1:1/0\ntables:\n  - name: a\n    key: [id]\n")
	badTable := write("badtable.yaml", "name: p1\nsource: postgres://u@127.0.0.1:1/s\ntarget: postgres://u@127.0.0.1:1/t\nredis: redis://127.0.0.1:1/0\ntables:\n  - name: a\n    key: [id]\n    shard: 2\n")

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unknown key", []string{"run", "-p", unknownKey}, 2, unknownKey + ":3:"},
		{"unknown key validate", []string{"validate", "-p", unknownKey}, 2, unknownKey + ":3:"},
		{"unknown table key", []string{"run", "-p", badTable}, 2, badTable + ":8:"},
		{"unknown command", []string{"frobnicate", "-p", unknownKey}, 2, "unknown command"},
		{"no command", nil, 2, "Usage"},
		{"no plan", []string{"run"}, 2, "no plan"},
		{"missing plan file", []string{"run", "-p", filepath.Join(dir, "absent.yaml")}, 2, "absent.yaml"},
		{"unknown flag", []string{"status", "-p", unknownKey, "--frob"}, 2, "frob"},
		{"stray argument", []string{"validate", "-p", unknownKey, "extra"}, 2, "extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runMigrate(t, tc.args...)
			wantCode(t, r, tc.code)
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr does not mention %q:\n%s", tc.stderr, r)
			}
			if r.stdout != "" {
				t.Errorf("an error printed on stdout:\n%s", r)
			}
		})
	}

	t.Run("verification mismatch", func(t *testing.T) {
		e := newEnv(t, pgEngine, pgEngine) // exit 3 is the CLI's; TestVerify finds differences in every engine pair
		const n = 3000
		seedBig(t, e, "big", n)
		exec1(t, e.dstDB, `CREATE TABLE big (id bigint PRIMARY KEY, payload text, n integer, _fence bigint NOT NULL DEFAULT 0)`)
		exec1(t, e.dstDB, `INSERT INTO big VALUES (999999999, 'only in the target', 1, 0)`)
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})
		r := runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 3)
		var rep runReport
		decodeJSON(t, r, &rep)
		if rep.Verify == nil || rep.Verify.Equal || len(rep.Verify.Tables) != 1 {
			t.Fatalf("verify %+v, want one unequal table", rep.Verify)
		}
		if tv := rep.Verify.Tables[0]; tv.SourceRows != n || tv.TargetRows != n+1 || tv.Extra != 1 || tv.Missing != 0 {
			t.Errorf("verify table %+v, want source %d, target %d, 1 extra", tv, n, n+1)
		}
		if rep.RowsWritten != n {
			t.Errorf("rows_written %d, want %d (the copy itself completes)", rep.RowsWritten, n)
		}
	})
}

// shards: auto (a plan that says nothing) splits a table of more than
// 250,000 rows into MySQL at the first run, and every later run keeps that
// count, read back from the target, whatever the table's size by then.
func TestRun_AutoShards(t *testing.T) {
	t.Parallel()
	inDirections(t, []direction{pgToMy}, func(t *testing.T, e *env) {
		const n = 260000 // two shards of AutoShardRows (250,000)
		seedBig(t, e, "big", n)
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})
		r := runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		if len(rep.Shards) != 2 || rep.RowsWritten != n {
			t.Fatalf("first run: shards %+v, rows_written %d; want 2 shards, %d rows", rep.Shards, rep.RowsWritten, n)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)

		// Now small enough for one shard (240,000 rows): the plan still has two.
		exec1(t, e.srcDB, "DELETE FROM big WHERE id > "+e.src.ph(1), 240000)
		r = runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 0)
		rep = runReport{}
		decodeJSON(t, r, &rep)
		if len(rep.Shards) != 2 || rep.RowsWritten != 0 {
			t.Errorf("second run: shards %+v, rows_written %d; want the 2 shards done, nothing written", rep.Shards, rep.RowsWritten)
		}
		if got := queryInt(t, e.dstDB, "SELECT count(*) FROM _migrate_checkpoint WHERE plan = "+e.dst.ph(1), e.name); got != 2 {
			t.Errorf("%d checkpoints, want 2", got)
		}
		st := runMigrate(t, "status", "-p", plan, "--json")
		wantCode(t, st, 0)
		if !strings.Contains(st.stdout, `"shards": 2`) && !strings.Contains(st.stdout, `"shards":2`) {
			t.Errorf("status does not count 2 shards: %s", st.stdout)
		}
	})
}
