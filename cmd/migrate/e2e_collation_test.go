package main_test

import (
	"slices"
	"strings"
	"testing"
)

// TestSchema_KeyCollationRefused: a PostgreSQL table keyed by 'a', 'A',
// 'b' and 'b ' into a MySQL/MariaDB table the user created with its key
// in utf8mb4_general_ci, where 'a' = 'A' and 'b' = 'b ': validate and run
// (and the dry run) refuse it with exit 2 before anything is written,
// naming the table, the column, the collation and the statement that
// makes the column compare bytes. Once that statement has run, the plan
// copies the four rows and verifies. A MySQL source whose key column has
// the target's collation is accepted: its keys are distinct under it.
func TestSchema_KeyCollationRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgEngine, mysqlEngine)
	exec1(t, e.srcDB, `CREATE TABLE words (w text PRIMARY KEY, n int NOT NULL)`)
	exec1(t, e.srcDB, `INSERT INTO words VALUES ('a', 1), ('A', 2), ('b', 3), ('b ', 4)`)
	exec1(t, e.dstDB, "CREATE TABLE words (w varchar(10) NOT NULL PRIMARY KEY, n int NOT NULL) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
	before := schemaSnapshot(t, mysqlEngine, e.dstDB)
	plan := e.plan(t, planTable{name: "words"})

	var fix string
	for _, args := range [][]string{{"validate", "-p", plan}, {"run", "-p", plan, "--dry-run"}, {"run", "-p", plan}, {"run", "-p", plan, "--no-verify"}} {
		r := runMigrate(t, args...)
		if r.code != 2 {
			t.Errorf("%v: want exit 2, got %s", args, r)
			continue
		}
		for _, w := range []string{"target table words", "key column w", "utf8mb4_general_ci", "ALTER TABLE `words` MODIFY `w` varchar(10) CHARACTER SET utf8mb4 COLLATE "} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr does not say %q:\n%s", args, w, r.stderr)
			}
		}
		if after := schemaSnapshot(t, mysqlEngine, e.dstDB); !slices.Equal(after, before) {
			t.Fatalf("%v changed the target:\nbefore %q\nafter  %q", args, before, after)
		}
		if i := strings.Index(r.stderr, "ALTER TABLE"); i >= 0 && fix == "" {
			fix, _, _ = strings.Cut(r.stderr[i:], "\n")
		}
	}
	if fix == "" {
		t.FailNow()
	}

	exec1(t, e.dstDB, fix)
	wantCode(t, runMigrate(t, "validate", "-p", plan), 0)
	wantCode(t, runMigrate(t, "run", "-p", plan), 0)
	if got := strings.Join(queryStrings(t, e.dstDB, "SELECT CONCAT('[', w, ']', n) FROM words ORDER BY n"), " "); got != "[a]1 [A]2 [b]3 [b ]4" {
		t.Errorf("target rows %s, want [a]1 [A]2 [b]3 [b ]4", got)
	}

	// MySQL to MySQL, the key in utf8mb4_general_ci on both sides.
	my := newEnv(t, mysqlEngine, mysqlEngine)
	for _, db := range []struct {
		name string
		exec func(string)
	}{{"source", func(q string) { exec1(t, my.srcDB, q) }}, {"target", func(q string) { exec1(t, my.dstDB, q) }}} {
		db.exec("CREATE TABLE words (w varchar(10) NOT NULL PRIMARY KEY, n int NOT NULL) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
	}
	exec1(t, my.srcDB, "INSERT INTO words VALUES ('a', 1), ('b', 3)")
	wantCode(t, runMigrate(t, "validate", "-p", my.plan(t, planTable{name: "words"})), 0)
}
