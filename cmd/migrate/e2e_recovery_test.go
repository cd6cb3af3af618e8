package main_test

// End-to-end tests of halting and operator resume (SPEC §6), of the checks a
// run makes before it writes (keys, shard count), of run --json when a run
// cannot start, and of the JSON shape of status. A halt and its resume,
// and status, run in every engine pair; the other checks in the two
// same-engine pairs (each engine at both ends).

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// prependPlan adds top-level YAML lines (e.g. "max_retries: 1") to a plan
// file written by env.plan.
func prependPlan(t *testing.T, path string, lines ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"+string(b)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// shardStatus finds one shard in status --json output.
func shardStatus(t *testing.T, tables []map[string]any, table string, shard int) map[string]any {
	t.Helper()
	for _, s := range tables {
		if s["table"] == table && s["shard"] == float64(shard) {
			return s
		}
	}
	t.Fatalf("status --json has no shard %s#%d: %v", table, shard, tables)
	return nil
}

// TestRun_HaltAndResume: a batch the target refuses every time (a CHECK
// constraint) halts the shard after max_retries; nothing resumes it until an
// operator runs `migrate resume`, after which the copy finishes from the
// checkpoint.
func TestRun_HaltAndResume(t *testing.T) {
	t.Parallel()
	inDirections(t, directions, func(t *testing.T, e *env) {
		const n = 3000
		seedBig(t, e, "big", n)
		exec1(t, e.dstDB, fmt.Sprintf(`CREATE TABLE big (id bigint PRIMARY KEY, payload %s, n %s, _fence bigint NOT NULL DEFAULT 0,
  CONSTRAINT big_id_small CHECK (id < 1500))`, e.dst.types["text"], e.dst.types["integer"]))
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})
		prependPlan(t, plan, "max_retries: 1")

		r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "halting")
		wantCode(t, r, 5)
		var raw map[string]any
		decodeJSON(t, r, &raw)
		requireKeys(t, "run --json", raw, "plan", "rows_written", "error")
		if msg, _ := raw["error"].(string); !strings.Contains(msg, "halted") {
			t.Errorf("run --json error %q, want it to say halted", raw["error"])
		}
		if raw["rows_written"] != float64(e.batchSize) {
			t.Errorf("rows_written %v, want the %d rows of the one batch that passed", raw["rows_written"], e.batchSize)
		}
		t.Logf("halted after %v", r.elapsed.Round(time.Millisecond))

		tables, leases := statusOf(t, plan)
		s := shardStatus(t, tables, "big", 0)
		if s["state"] != "halted" || s["rows_done"] != float64(e.batchSize) || s["last_key"] != float64(e.batchSize) {
			t.Errorf("status of the halted shard %v, want halted with %d rows done, last_key %d", s, e.batchSize, e.batchSize)
		}
		if len(leases) != 0 {
			t.Errorf("leases after halting: %v, want none (released)", leases)
		}
		before := e.checkpoint(t, "big", 0)

		// A halted shard stays halted: the next run stops at once, writing nothing.
		r = runMigrate(t, "run", "-p", plan, "--json", "--instance", "again")
		wantCode(t, r, 5)
		var rep runReport
		decodeJSON(t, r, &rep)
		if rep.RowsWritten != 0 || rep.Batches != 0 || len(rep.Takeovers) != 0 {
			t.Errorf("run on a halted shard: rows_written %d batches %d takeovers %d, want nothing done", rep.RowsWritten, rep.Batches, len(rep.Takeovers))
		}
		if !strings.Contains(r.stdout, `"error"`) || !strings.Contains(r.stderr, "resume") {
			t.Errorf("run on a halted shard: want an error in the JSON and a hint to resume on stderr\n%s", r)
		}
		if r.elapsed > 10*time.Second {
			t.Errorf("run on a halted shard took %v, want it to stop at once", r.elapsed)
		}
		if cp := e.checkpoint(t, "big", 0); cp != before {
			t.Errorf("checkpoint %+v after the refused run, want unchanged %+v", cp, before)
		}
		if got := queryInt(t, e.dstDB, `SELECT count(*) FROM big`); got != int64(e.batchSize) {
			t.Errorf("target holds %d rows, want %d", got, e.batchSize)
		}

		// The operator fixes the cause and gives the go-ahead.
		exec1(t, e.dstDB, `ALTER TABLE big DROP CONSTRAINT big_id_small`) // MySQL 8.0.19+, MariaDB 10.2+
		r = runMigrate(t, "resume", "-p", plan)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "resumed 1 ") {
			t.Errorf("resume output does not say it resumed 1 shard:\n%s", r)
		}
		if cp := e.checkpoint(t, "big", 0); cp.state != "pending" || cp.rowsDone != before.rowsDone {
			t.Errorf("checkpoint after resume %+v, want pending with %d rows done", cp, before.rowsDone)
		}
		if r = runMigrate(t, "resume", "-p", plan); r.code != 0 || !strings.Contains(r.stdout, "resumed 0 ") {
			t.Errorf("a second resume: want exit 0 and 0 shards resumed\n%s", r)
		}

		r = runMigrate(t, "run", "-p", plan, "--json", "--instance", "after-resume")
		wantCode(t, r, 0)
		rep = runReport{}
		decodeJSON(t, r, &rep)
		if rep.RowsWritten != n-before.rowsDone || rep.Verify == nil || !rep.Verify.Equal {
			t.Errorf("run after resume: rows_written %d verify %+v, want %d and equal", rep.RowsWritten, rep.Verify, n-before.rowsDone)
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
		if cp := e.checkpoint(t, "big", 0); cp.state != "done" || cp.rowsDone != n {
			t.Errorf("checkpoint %+v, want done with %d rows", cp, n)
		}
	})
}

// TestRun_InvalidKeys: keys keyset pagination or the upsert cannot rely on
// are refused before anything is written to the target (exit 2).
func TestRun_InvalidKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		src       []string // DDL; {text} is the engine's type of a text that can be in a key
		dst       string   // DDL; may be empty
		key       []string
		wantInErr string
		pgOnly    bool
	}{
		{"nullable key", []string{`CREATE TABLE t (id bigint UNIQUE, v {text})`}, "", []string{"id"}, "NULL", false},
		{"key not unique", []string{`CREATE TABLE t (id bigint NOT NULL, v {text})`}, "", []string{"id"}, "unique", false},
		{"unique index wider than the key", []string{`CREATE TABLE t (id bigint NOT NULL, v {text} NOT NULL, UNIQUE (id, v))`}, "", []string{"id"}, "unique", false},
		// PostgreSQL to PostgreSQL only: MySQL has no partial indexes.
		{"only a partial unique index", []string{`CREATE TABLE t (id bigint NOT NULL, v {text})`,
			`CREATE UNIQUE INDEX t_id_pos ON t (id) WHERE id > 0`}, "", []string{"id"}, "unique", true},
		{"target without a unique key", []string{`CREATE TABLE t (id bigint PRIMARY KEY, v {text})`},
			`CREATE TABLE t (id bigint NOT NULL, v {text})`, []string{"id"}, "unique index", false},
		{"target unique on another column", []string{`CREATE TABLE t (id bigint PRIMARY KEY, v {text})`},
			`CREATE TABLE t (id bigint NOT NULL, v {text} UNIQUE)`, []string{"id"}, "unique index", false},
	} {
		dirs := sameEngine
		if tc.pgOnly {
			dirs = []direction{pgToPG}
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inDirections(t, dirs, func(t *testing.T, e *env) { invalidKey(t, e, tc.src, tc.dst, tc.key, tc.wantInErr) })
		})
	}
}

// invalidKey is one case of TestRun_InvalidKeys in e's direction.
func invalidKey(t *testing.T, e *env, src []string, dst string, key []string, wantInErr string) {
	text := func(eng *engine, ddl string) string {
		return strings.ReplaceAll(ddl, "{text}", map[*engine]string{pgEngine: "text", mysqlEngine: "varchar(64)"}[eng])
	}
	for _, q := range src {
		exec1(t, e.srcDB, text(e.src, q))
	}
	v := "'v' || g"
	if e.src == mysqlEngine {
		v = "CONCAT('v', g)"
	}
	exec1(t, e.srcDB, "INSERT INTO t SELECT g, "+v+" FROM "+seq(e.src, 50, "s"))
	if dst != "" {
		exec1(t, e.dstDB, text(e.dst, dst))
	}
	plan := e.plan(t, planTable{name: "t", key: key})
	r := runMigrate(t, "run", "-p", plan, "--json")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, wantInErr) || !strings.Contains(r.stderr, "key") {
		t.Errorf("stderr does not explain the key problem (want %q):\n%s", wantInErr, r)
	}
	var raw map[string]any
	decodeJSON(t, r, &raw)
	if msg, _ := raw["error"].(string); msg == "" {
		t.Errorf("run --json has no error:\n%s", r)
	}
	// Refused before any write: the setup transaction rolled back.
	if e.hasTable(t, "_migrate_checkpoint") {
		t.Errorf("the target got helper tables although the plan was refused")
	}
	if dst != "" {
		if got := strings.Join(e.targetTypes(t, "t"), ", "); strings.Contains(got, "_fence") {
			t.Errorf("the refused target table was altered: %s", got)
		}
	}
}

// TestRun_ShardCountChanged: the key ranges are fixed at the first run, so a
// plan whose shard count changed is refused (exit 2) without touching the
// checkpoints.
func TestRun_ShardCountChanged(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		const n = 5000
		seedBig(t, e, "big", n)
		wantCode(t, runMigrate(t, "run", "-p", e.plan(t, planTable{name: "big", key: []string{"id"}, shards: 2})), 0)

		for _, shards := range []int{1, 3} {
			plan := e.plan(t, planTable{name: "big", key: []string{"id"}, shards: shards})
			r := runMigrate(t, "run", "-p", plan)
			if r.code != 2 {
				t.Errorf("shards 2 -> %d: want exit 2, got %s", shards, r)
				continue
			}
			if !strings.Contains(r.stderr, "checkpoints") || !strings.Contains(r.stderr, "shards") {
				t.Errorf("shards %d: stderr does not mention the checkpoints and shards:\n%s", shards, r)
			}
			if got := queryInt(t, e.dstDB, "SELECT count(*) FROM _migrate_checkpoint WHERE plan = "+e.dst.ph(1), e.name); got != 2 {
				t.Errorf("shards %d: %d checkpoints after the refusal, want the 2 of the first run", shards, got)
			}
		}
		// Overlapping key ranges would count rows twice.
		if got := e.mustRowsDone(t, "big"); got != n {
			t.Errorf("the checkpoints hold %d rows done, want %d", got, n)
		}
		for i := range 2 {
			if cp := e.checkpoint(t, "big", i); cp.state != "done" {
				t.Errorf("shard %d checkpoint %+v, want still done", i, cp)
			}
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}

// TestRun_JSONOnFailure: with --json a run that cannot start still prints
// exactly one JSON object with the error, for scripts.
func TestRun_JSONOnFailure(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		seedBig(t, e, "big", 10)
		e.redisURL = "redis://127.0.0.1:1/0"
		noRedis := e.plan(t, planTable{name: "big", key: []string{"id"}})
		e.batchSize = -5
		invalid := e.plan(t, planTable{name: "big", key: []string{"id"}})

		for _, tc := range []struct {
			name   string
			plan   string
			code   int
			inErr  string
			plName string
		}{
			{"unreachable redis", noRedis, 1, "redis", e.name},
			{"invalid plan", invalid, 2, "batch_size", ""},
			{"missing plan file", noRedis + ".absent", 2, "absent", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := runMigrate(t, "run", "-p", tc.plan, "--json")
				wantCode(t, r, tc.code)
				var raw map[string]any
				decodeJSON(t, r, &raw)
				requireKeys(t, "run --json", raw, "plan", "error")
				if msg, _ := raw["error"].(string); msg == "" || !strings.Contains(msg, tc.inErr) {
					t.Errorf("error %q, want it to mention %q", raw["error"], tc.inErr)
				}
				if tc.plName != "" && raw["plan"] != tc.plName {
					t.Errorf("plan %v, want %q", raw["plan"], tc.plName)
				}
				if !strings.Contains(r.stderr, tc.inErr) {
					t.Errorf("stderr does not mention %q:\n%s", tc.inErr, r)
				}
			})
		}
		if e.hasTable(t, "_migrate_checkpoint") {
			t.Errorf("a run that could not start created helper tables in the target")
		}
	})
}

// TestStatus_LastKeyIsNumber: status --json shows an integer cursor as a
// JSON number, a composite one as an array, none as null; tables[] names
// the plan's table and its target.
func TestStatus_LastKeyIsNumber(t *testing.T) {
	t.Parallel()
	inDirections(t, directions, func(t *testing.T, e *env) {
		const n = 2500
		seedBig(t, e, "big", n)
		nEvents := seedEvents(t, e, 5, 20)
		(&table{name: "empty", key: []string{"code"}, cols: []col{{"code", "keytext", kText}, {"v", "integer", kNum}}}).create(t, e.src, e.srcDB)
		events := "events"
		if e.src == pgEngine {
			events = "public.events" // a schema-qualified name
		}
		plan := e.plan(t,
			planTable{name: "big", target: "big_copy", key: []string{"id"}},
			planTable{name: events, target: "events_copy", key: []string{"tenant", "code"}},
			planTable{name: "empty", key: []string{"code"}})
		wantCode(t, runMigrate(t, "run", "-p", plan), 0)

		tables, _ := statusOf(t, plan)
		if len(tables) != 3 {
			t.Fatalf("status tables %v, want 3 shards", tables)
		}
		big := shardStatus(t, tables, "big", 0)
		if big["target"] != "big_copy" || big["rows_done"] != float64(n) {
			t.Errorf("big: %v, want target big_copy and %d rows done", big, n)
		}
		if k, ok := big["last_key"].(float64); !ok || k != n {
			t.Errorf("big last_key is %T %v, want the JSON number %d", big["last_key"], big["last_key"], n)
		}
		ev := shardStatus(t, tables, events, 0)
		if ev["target"] != "events_copy" || ev["rows_done"] != float64(nEvents) {
			t.Errorf("events: %v, want target events_copy and %d rows done", ev, nEvents)
		}
		if k, ok := ev["last_key"].([]any); !ok || len(k) != 2 || k[0] != float64(5) || k[1] != "c0020" {
			t.Errorf("events last_key is %T %v, want the array [5, \"c0020\"]", ev["last_key"], ev["last_key"])
		}
		if em := shardStatus(t, tables, "empty", 0); em["last_key"] != nil || em["state"] != "done" || em["target"] != "empty" {
			t.Errorf("empty table: %v, want done with last_key null and target empty", em)
		}
		assertSameRows(t, e, "big", "big_copy", bigColumns, []string{"id"}, n)
	})
}

// TestRun_FinishedPlanSkipsCheck: a second run of a finished plan copies
// and checks nothing: rows_written 0 and "verify": null.
func TestRun_FinishedPlanSkipsCheck(t *testing.T) {
	t.Parallel()
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		const n = 1500
		seedBig(t, e, "big", n)
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})
		r := runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 0)
		var first runReport
		decodeJSON(t, r, &first)
		if first.Verify == nil || !first.Verify.Equal {
			t.Fatalf("first run verify %+v, want equal", first.Verify)
		}

		r = runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 0)
		var raw map[string]any
		decodeJSON(t, r, &raw)
		requireKeys(t, "run --json", raw, "plan", "rows_written", "batches", "verify")
		if raw["rows_written"] != float64(0) || raw["batches"] != float64(0) || raw["verify"] != nil {
			t.Errorf("second run: rows_written %v batches %v verify %v, want 0, 0, null", raw["rows_written"], raw["batches"], raw["verify"])
		}
		if _, ok := raw["error"]; ok {
			t.Errorf("second run reports an error: %v", raw["error"])
		}
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, n)
	})
}
