package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// badPlanUnsetVar is an environment variable no test environment sets.
const badPlanUnsetVar = "MIGRATE_E2E_BADPLAN_NEVER_SET"

// badPlanLines is a valid plan for e, one string per line: the cases of
// TestBadPlan break one thing in it, so every position they expect is
// counted from this layout (line 1 is index 0).
func badPlanLines(e *env) []string {
	return []string{
		"name: " + e.name,
		fmt.Sprintf("source: %q", e.srcURL),
		fmt.Sprintf("target: %q", e.dstURL),
		fmt.Sprintf("redis: %q", e.redisURL),
		"lease_ttl: 30s",
		"batch_size: 1000",
		"tables:",
		"  - name: big",
		"    key: [id]",
	}
}

// TestBadPlan: every kind of broken plan file is refused by validate and by
// run --json with exit code 2 and one error naming the file, line and
// (where known) column and saying what is wrong, and run writes nothing:
// no table at all in the target database (so no _migrate_* helper table)
// and no migrate:{plan...} key in Redis. The other fields of each plan
// point at real, reachable servers and a real source table, so a run that
// went ahead would leave traces; the "valid plan" case shows that it does.
func TestBadPlan(t *testing.T) {
	t.Parallel()
	if _, set := os.LookupEnv(badPlanUnsetVar); set {
		t.Fatalf("%s is set in the test environment; the unset-variable case needs it unset", badPlanUnsetVar)
	}
	for _, tc := range []struct {
		name     string
		edit     func(l []string) []string // breaks the valid plan
		planName string                    // the name the plan gives; "" = the env's
		pos      string                    // what follows the path: ":line:column: " or ":line: "
		msg      string                    // the whole message after pos
	}{
		{
			name: "tab indentation",
			edit: func(l []string) []string { l[4] = "\t" + l[4]; return l },
			pos:  ":5:1: ",
			msg:  "invalid YAML: found character that cannot start any token (the line is indented with a tab; YAML indents with spaces only)",
		},
		{
			// yaml.v3 reports only the line of a syntax error, so no column.
			name: "unclosed bracket",
			edit: func(l []string) []string { l[8] = "    key: [id"; return l },
			pos:  ":9: ",
			msg:  "invalid YAML: did not find expected ',' or ']'",
		},
		{
			name: "unknown key with a suggestion",
			edit: func(l []string) []string { l[5] = "batchsize: 1000"; return l },
			pos:  ":6:1: ",
			msg:  `unknown key "batchsize" in plan (did you mean "batch_size"?)`,
		},
		{
			name: "an empty tables list",
			edit: func(l []string) []string { return append(l[:6], "tables: []") },
			pos:  ":7:9: ",
			msg:  "at least one table is required (tables: - name: ...), or leave tables out to copy every table of the source",
		},
		{
			name: "an empty key",
			edit: func(l []string) []string { l[8] = "    key: []"; return l },
			pos:  ":9:10: ",
			msg:  `table "big": key must name at least one column (leave it out for the primary key)`,
		},
		{
			name: "bad duration",
			edit: func(l []string) []string { l[4] = "lease_ttl: 5 parsecs"; return l },
			pos:  ":5:12: ",
			msg:  `lease_ttl "5 parsecs" is not a duration (want a number with a unit, like 30s or 1m30s)`,
		},
		{
			name: "negative batch size",
			edit: func(l []string) []string { l[5] = "batch_size: -1"; return l },
			pos:  ":6:13: ",
			msg:  "batch_size -1 is out of range 1..100000",
		},
		{
			name:     "name outside [a-z0-9_-]",
			edit:     func(l []string) []string { l[0] = "name: Name With Spaces"; return l },
			planName: "Name With Spaces",
			pos:      ":1:7: ",
			msg:      `name "Name With Spaces" must match [a-z0-9_-]+`,
		},
		{
			name: "unset variable",
			edit: func(l []string) []string { l[1] = "source: ${" + badPlanUnsetVar + "}"; return l },
			pos:  ":2:9: ",
			msg:  "source: environment variable " + badPlanUnsetVar + " is not set",
		},
		{
			// The control: the same plan unbroken is run, and leaves the
			// traces the other cases look for.
			name: "valid plan",
			edit: func(l []string) []string { return l },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, pgEngine, pgEngine) // a plan's parsing does not depend on the engines
			seedBig(t, e, "big", 100)
			path := filepath.Join(t.TempDir(), "plan.yaml")
			if err := os.WriteFile(path, []byte(strings.Join(tc.edit(badPlanLines(e)), "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			planName := tc.planName
			if planName == "" {
				planName = e.name
			}

			if tc.msg == "" {
				wantCode(t, runMigrate(t, "validate", "-p", path), 0)
				wantCode(t, runMigrate(t, "run", "-p", path, "--json"), 0)
				if n := badPlanTargetRelations(t, e, `\_migrate\_%`); n == 0 {
					t.Errorf("a valid run left no _migrate_* table in the target")
				}
				if keys := badPlanRedisKeys(t, e, planName); len(keys) == 0 {
					t.Errorf("a valid run left no Redis key naming the plan")
				}
				return
			}

			want := path + tc.pos + tc.msg
			r := runMigrate(t, "validate", "-p", path)
			wantCode(t, r, 2)
			if !strings.Contains(r.stderr, want+"\n") {
				t.Errorf("validate: stderr does not hold the error\n%s\nwant %q", r, want)
			}
			if r.stdout != "" {
				t.Errorf("validate printed on stdout:\n%s", r)
			}

			r = runMigrate(t, "run", "-p", path, "--json")
			wantCode(t, r, 2)
			var rep map[string]any
			decodeJSON(t, r, &rep)
			if got, _ := rep["error"].(string); got != want {
				t.Errorf("run --json: error %q\nwant  %q\n%s", got, want, r)
			}
			if !strings.Contains(r.stderr, want) {
				t.Errorf("run: stderr does not hold the error\n%s\nwant %q", r, want)
			}

			// Nothing written: the target database is as created (no
			// helper tables, no target table), and Redis holds no key of
			// the plan.
			if n := badPlanTargetRelations(t, e, `\_migrate\_%`); n != 0 {
				t.Errorf("the target got %d _migrate_* relation(s) although the plan was refused", n)
			}
			if n := badPlanTargetRelations(t, e, "%"); n != 0 {
				t.Errorf("the target got %d relation(s) although the plan was refused", n)
			}
			if keys := badPlanRedisKeys(t, e, planName); len(keys) != 0 {
				t.Errorf("Redis got keys of the refused plan: %v", keys)
			}
		})
	}
}

// badPlanTargetRelations counts the relations (tables, indexes, sequences, ...)
// outside the system schemas of e's target database whose name is LIKE
// pattern.
func badPlanTargetRelations(t *testing.T, e *env, pattern string) int64 {
	t.Helper()
	return queryInt(t, e.dstDB, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' AND c.relname LIKE $1`, pattern)
}

// badPlanRedisKeys lists the keys of the shared Redis that name the plan, such as
// its leases and fencing tokens "migrate:{plan:table:shard}...".
func badPlanRedisKeys(t *testing.T, e *env, plan string) []string {
	t.Helper()
	opts, err := redis.ParseURL(e.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	var keys []string
	iter := rdb.Scan(t.Context(), 0, "*"+badPlanGlobEscape(plan)+"*", 1000).Iterator()
	for iter.Next(t.Context()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scan Redis: %v", err)
	}
	return keys
}

// badPlanGlobEscape quotes the characters special to a Redis MATCH pattern.
func badPlanGlobEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
