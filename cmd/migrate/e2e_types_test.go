package main_test

// MySQL → PostgreSQL types that need the source's values or the plan's
// word (issue 25): an unsigned bigint AUTO_INCREMENT key, bit and spatial
// columns.

import (
	"slices"
	"strings"
	"testing"
)

// A bigint unsigned AUTO_INCREMENT key holding a value above PostgreSQL's
// bigint is refused by validate, the dry run and the run (exit 2, the
// types: way out in the message), before anything is written; with the
// plan's numeric(20,0) the table is created without an identity (noted)
// and copied. A bit column whose plan type its values do not convert to
// is refused the same way.
func TestValidate_MySQLToPostgresTypesRefused(t *testing.T) {
	t.Parallel()
	inDirections(t, []direction{myToPG}, func(t *testing.T, e *env) {
		exec1(t, e.srcDB, "CREATE TABLE big_ids (id bigint unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY, flag bit(1) NOT NULL, note varchar(20))")
		exec1(t, e.srcDB, "INSERT INTO big_ids VALUES (1, 1, 'one'), (9223372036854775808, 0, 'past bigint'), (18446744073709551615, 1, 'largest')")
		before := schemaSnapshot(t, e.dst, e.dstDB)
		plan := e.plan(t, planTable{name: "big_ids", types: map[string]string{"flag": "boolean"}})
		for _, args := range [][]string{{"validate", "-p", plan}, {"run", "-p", plan, "--dry-run"}, {"run", "-p", plan}} {
			r := runMigrate(t, args...)
			wantCode(t, r, 2)
			if !strings.Contains(r.stderr, "big_ids.id: bigint(20) unsigned AUTO_INCREMENT holds 18446744073709551615") || !strings.Contains(r.stderr, `types: {"id": "numeric(20,0)"}`) {
				t.Errorf("%s: the error does not name the column, its value and the way out:\n%s", args[0], r.stderr)
			}
		}
		r := runMigrate(t, "validate", "-p", e.plan(t, planTable{name: "big_ids", types: map[string]string{"id": "numeric(20,0)", "flag": "text"}}))
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "big_ids.flag: bit(1) does not convert to text (it does to boolean,") {
			t.Errorf("validate: an unconvertible type is not refused by name:\n%s", r.stderr)
		}
		if after := schemaSnapshot(t, e.dst, e.dstDB); !slices.Equal(after, before) {
			t.Fatalf("a refused plan changed the target:\n%v\nwant\n%v", after, before)
		}

		plan = e.plan(t, planTable{name: "big_ids", types: map[string]string{"id": "numeric(20,0)", "flag": "boolean"}})
		r = runMigrate(t, "validate", "-p", plan)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "column id: AUTO_INCREMENT not reproduced") {
			t.Errorf("validate does not note the identity left out:\n%s", r.stdout)
		}
		wantCode(t, runMigrate(t, "run", "-p", plan), 0)
		got := queryStrings(t, e.dstDB, "SELECT id::text || ' ' || flag FROM big_ids ORDER BY id")
		if want := []string{"1 true", "9223372036854775808 false", "18446744073709551615 true"}; !slices.Equal(got, want) {
			t.Errorf("copied %q, want %q", got, want)
		}
	})
}
