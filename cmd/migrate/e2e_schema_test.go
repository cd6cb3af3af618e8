package main_test

// End-to-end tests of bad input and unusual schemas: a missing source table,
// source column or target column is refused as an invalid plan (exit 2)
// before anything is written; a target user without the rights to create
// tables is told which statement failed, and nothing is left half-created;
// identifiers with quotes, backticks, spaces, upper case and non-ASCII
// letters are copied in every direction.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// schemaSnapshot lists every column of every table of the database (of
// the current schema in PostgreSQL) with the table's row count: what a
// refused plan must leave as it was.
func schemaSnapshot(t *testing.T, eng *engine, db *sql.DB) []string {
	t.Helper()
	where := "table_schema = current_schema()"
	if eng == mysqlEngine {
		where = "table_schema = DATABASE()"
	}
	cols := queryStrings(t, db, `SELECT table_name, column_name FROM information_schema.columns WHERE `+where+` ORDER BY 1, 2`)
	var out []string
	seen := map[string]bool{}
	for _, c := range cols {
		tbl, _, _ := strings.Cut(c, "|")
		if !seen[tbl] {
			seen[tbl] = true
			out = append(out, fmt.Sprintf("%s: %d rows", tbl, queryInt(t, db, "SELECT count(*) FROM "+eng.quote(tbl))))
		}
		out = append(out, c)
	}
	return out
}

// TestSchema_BadInputRefused: a source table that does not exist, a column
// of the plan's columns the source table lacks, and a copied column an
// existing target table lacks each stop run and run --dry-run with exit 2
// and a message naming the table and column, before anything is written.
func TestSchema_BadInputRefused(t *testing.T) {
	t.Parallel()
	inDirections(t, directions, func(t *testing.T, e *env) {
		src, dst := e.src, e.dst
		e.batchSize = 7
		q := src.quote
		exec1(t, e.srcDB, fmt.Sprintf("CREATE TABLE %s (%s bigint NOT NULL PRIMARY KEY, %s varchar(20), %s varchar(20))",
			q("present"), q("id"), q("a"), q("b")))
		exec1(t, e.srcDB, fmt.Sprintf("INSERT INTO %s VALUES (1, 'x', 'y'), (2, 'z', NULL)", q("present")))
		// The target holds "present" without "b" (and without the
		// fence column), and one row that must stay as it is.
		qd := dst.quote
		exec1(t, e.dstDB, fmt.Sprintf("CREATE TABLE %s (%s bigint NOT NULL PRIMARY KEY, %s varchar(20))", qd("present"), qd("id"), qd("a")))
		exec1(t, e.dstDB, fmt.Sprintf("INSERT INTO %s VALUES (7, 'keep')", qd("present")))
		before := schemaSnapshot(t, dst, e.dstDB)

		for _, c := range []struct {
			name  string
			table planTable
			want  []string // in stderr
		}{
			{"missing source table", planTable{name: "nosuch", key: []string{"id"}},
				[]string{"source table nosuch does not exist"}},
			{"missing source column", planTable{name: "present", key: []string{"id"}, columns: []string{"id", "a", "nope"}},
				[]string{"source table present", `no column "nope"`}},
			{"missing target column", planTable{name: "present", key: []string{"id"}},
				[]string{"target table present", `no column "b"`}},
		} {
			plan := e.plan(t, c.table)
			for _, args := range [][]string{{"run", "-p", plan, "--dry-run"}, {"run", "-p", plan}} {
				r := runMigrate(t, args...)
				if r.code != 2 {
					t.Errorf("%s: %v: want exit 2, got %s", c.name, args, r)
					continue
				}
				for _, w := range c.want {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("%s: %v: stderr does not say %q:\n%s", c.name, args, w, r.stderr)
					}
				}
				if after := schemaSnapshot(t, dst, e.dstDB); !slices.Equal(after, before) {
					t.Fatalf("%s: %v changed the target:\nbefore %q\nafter  %q", c.name, args, before, after)
				}
			}
		}
	})
}

// TestSchema_NoCreateRights: a target user who may not create tables, or
// not alter an existing target table to add the fence column, gets an error
// naming the statement that failed, and the target is left as it was: no
// helper table, no target table created for another table of the plan.
// Once the user owns the table, the same plan runs.
func TestSchema_NoCreateRights(t *testing.T) {
	t.Parallel()
	// The role's cleanup is registered before the databases', so it runs
	// after them (a role owning objects cannot be dropped).
	admin := testsvc.OpenPostgres(t, testsvc.PostgresURL(t))
	role := testsvc.Prefix(t)
	pass := "pw-" + role[len(role)-12:]
	exec1(t, admin, `CREATE ROLE `+ident(role)+` LOGIN PASSWORD '`+pass+`'`)
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), `DROP ROLE IF EXISTS `+ident(role)) })

	// PostgreSQL to PostgreSQL: its roles and grants are PostgreSQL's
	// (TestSchema_NoCreateRightsMySQL is the MySQL target's).
	e := newEnv(t, pgEngine, pgEngine)
	e.batchSize = 7
	seedBig(t, e, "big", 50)
	seedBig(t, e, "owned", 30)
	u, err := url.Parse(e.dstURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, pass)
	asRole := u.String()
	e.dstURL = asRole // the plans'; e.dstDB is the test's own connection
	snapshot := func() []string { return schemaSnapshot(t, pgEngine, e.dstDB) }

	// PostgreSQL 15+: only the database owner may create in public.
	t.Run("no CREATE on the schema", func(t *testing.T) {
		plan := e.plan(t, planTable{name: "big", key: []string{"id"}})
		r := runMigrate(t, "run", "-p", plan)
		wantCode(t, r, 1)
		for _, w := range []string{`CREATE TABLE "big" (`, `"payload" text`, "permission denied for schema public"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
			}
		}
		if got := snapshot(); len(got) != 0 {
			t.Errorf("the refused run left %q in the target", got)
		}
	})

	// CREATE on the schema, but "owned" belongs to another user: the fence
	// column cannot be added. "big", created first, must not stay.
	exec1(t, e.dstDB, `GRANT CREATE ON SCHEMA public TO `+ident(role))
	exec1(t, e.dstDB, `CREATE TABLE owned (id bigint PRIMARY KEY, payload text, n integer)`)
	exec1(t, e.dstDB, `GRANT SELECT, INSERT, UPDATE, DELETE ON owned TO `+ident(role))
	plan := e.plan(t, planTable{name: "big", key: []string{"id"}}, planTable{name: "owned", key: []string{"id"}})
	t.Run("not the owner of a target table", func(t *testing.T) {
		before := snapshot()
		r := runMigrate(t, "run", "-p", plan)
		wantCode(t, r, 1)
		for _, w := range []string{`ALTER TABLE "owned" ADD COLUMN IF NOT EXISTS "_fence" bigint`, "must be owner of table owned"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
			}
		}
		if after := snapshot(); !slices.Equal(after, before) {
			t.Errorf("the failed run changed the target:\nbefore %q\nafter  %q", before, after)
		}
	})

	t.Run("then the owner", func(t *testing.T) {
		exec1(t, e.dstDB, `ALTER TABLE owned OWNER TO `+ident(role))
		wantCode(t, runMigrate(t, "run", "-p", plan), 0)
		assertSameRows(t, e, "big", "big", bigColumns, []string{"id"}, 50)
		assertSameRows(t, e, "owned", "owned", bigColumns, []string{"id"}, 30)
	})
}

// TestSchema_NoCreateRightsMySQL: the same on a MySQL target, whose DDL is
// not transactional: a table created for the plan is dropped again when a
// later statement fails.
func TestSchema_NoCreateRightsMySQL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgEngine, mysqlEngine)
	e.batchSize = 7
	seedBig(t, e, "big", 50)
	seedBig(t, e, "owned", 30)
	exec1(t, e.dstDB, "CREATE TABLE owned (id bigint PRIMARY KEY, payload longtext, n int)")
	u, err := url.Parse(e.dstURL)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	prefix := testsvc.Prefix(t)
	user, pass := "mig_"+prefix[len(prefix)-12:], "pw-"+prefix[len(prefix)-12:]
	admin := e.dstDB
	exec1(t, admin, "CREATE USER "+mysqlEngine.quote(user)+"@'%' IDENTIFIED BY '"+pass+"'")
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP USER IF EXISTS "+mysqlEngine.quote(user)+"@'%'")
	})
	grant := func(privs string) {
		exec1(t, admin, "GRANT "+privs+" ON "+mysqlEngine.quote(db)+".* TO "+mysqlEngine.quote(user)+"@'%'")
	}
	grant("SELECT, INSERT, UPDATE, DELETE")
	u.User = url.UserPassword(user, pass)
	e.dstURL = u.String() // the plan's; e.dstDB is the test's own connection
	plan := e.plan(t, planTable{name: "big", key: []string{"id"}}, planTable{name: "owned", key: []string{"id"}})
	snapshot := func() []string { return schemaSnapshot(t, mysqlEngine, e.dstDB) }

	for _, c := range []struct {
		name  string
		grant string   // before the run
		want  []string // in stderr
	}{
		{"no CREATE", "", []string{"CREATE TABLE `big` (", "`payload` longtext", "denied"}},
		// "big" is created, then "owned" cannot be altered: "big" goes again.
		{"no ALTER", "CREATE, DROP", []string{"ALTER TABLE `owned` ADD COLUMN `_fence` bigint", "denied"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.grant != "" {
				grant(c.grant)
			}
			before := snapshot()
			r := runMigrate(t, "run", "-p", plan)
			wantCode(t, r, 1)
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
				}
			}
			if after := snapshot(); !slices.Equal(after, before) {
				t.Errorf("the failed run changed the target:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
	t.Run("with every right", func(t *testing.T) {
		grant("ALTER")
		wantCode(t, runMigrate(t, "run", "-p", plan), 0)
	})
}

// identName is a table name with a double quote, a space, upper case and
// a non-ASCII letter (no dot: a plan splits "schema.table" at the first).
const identName = `Ordérs "x"`

// identTable is a table whose every name needs quoting in both engines.
func identTable(name string) *table {
	tb := &table{name: name, key: []string{"Id"}, cols: []col{
		{"Id", "bigint", kNum}, {"my col", "decimal", kNum}, {`qu"ote`, "text", kText},
		{"back`tick", "timestamp", kTime}, {"naïve", "varchar", kText},
	}}
	base := time.Date(2024, 2, 29, 23, 59, 59, 123456000, time.UTC)
	for i := range 60 {
		row := []any{int64(i*3 + 1), fmt.Sprintf("%d.%03d", i*41, i%1000), fmt.Sprintf(`text "%d" with `+"`ticks`", i),
			base.Add(time.Duration(i) * (time.Hour + time.Microsecond)), fmt.Sprintf("naïve café %d", i)}
		if i%9 == 0 {
			row[1], row[2], row[3], row[4] = nil, nil, nil, nil
		}
		tb.rows = append(tb.rows, row)
	}
	return tb
}

// mysqlTableName is name as a MySQL server stores it: servers with
// lower_case_table_names set fold table names to lower case.
func mysqlTableName(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	if queryInt(t, db, "SELECT @@lower_case_table_names") != 0 {
		return strings.ToLower(name)
	}
	return name
}

// shardState is a shard in status --json.
type shardState struct {
	Table string `json:"table"`
	State string `json:"state"`
}

// TestIdent_QuotedNames copies a table whose table and column names hold
// double quotes, backticks, spaces, upper case and non-ASCII letters in
// every direction, two shards where the engines differ; migrate verify
// finds no difference, and a dump of both sides by SQL agrees. Then a
// changed and an extra row in the target are found by verify and fixed by
// repair.
func TestIdent_QuotedNames(t *testing.T) {
	t.Parallel()
	inDirections(t, directions, func(t *testing.T, e *env) {
		src, dst := e.src, e.dst
		e.batchSize = 7
		srcName, dstName := identName, identName
		if src == mysqlEngine {
			srcName = mysqlTableName(t, e.srcDB, identName)
		}
		if dst == mysqlEngine {
			dstName = mysqlTableName(t, e.dstDB, identName)
		}
		tb := identTable(srcName)
		tb.create(t, src, e.srcDB)
		shards := 1
		if src != dst {
			shards = 2
		}
		plan := e.plan(t, planTable{name: srcName, target: dstName, key: tb.key, shards: shards})
		r := runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 0)
		wantCode(t, runMigrate(t, "verify", "-p", plan), 0)
		st := runMigrate(t, "status", "-p", plan, "--json")
		wantCode(t, st, 0)
		var status struct {
			Tables []shardState `json:"tables"`
		}
		if err := json.Unmarshal([]byte(st.stdout), &status); err != nil {
			t.Fatalf("status --json: %v\n%s", err, st)
		}
		if len(status.Tables) != shards || slices.ContainsFunc(status.Tables, func(s shardState) bool { return s.Table != dstName || s.State != "done" }) {
			t.Errorf("status %+v, want %d shards of %q done", status.Tables, shards, dstName)
		}

		want := dump(t, src, e.srcDB, srcName, tb.cols, tb.key)
		got := dump(t, dst, e.dstDB, dstName, tb.cols, tb.key)
		if len(want) != len(tb.rows) || len(got) != len(want) {
			t.Fatalf("source dump %d rows, target %d, want %d", len(want), len(got), len(tb.rows))
		}
		for i := range want {
			if !slices.Equal(want[i].vals, got[i].vals) {
				t.Fatalf("row %d differs:\nsource %q\ntarget %q", i, want[i].vals, got[i].vals)
			}
		}
		if n := queryInt(t, e.dstDB, "SELECT count(*) FROM "+dst.quote(dstName)+" WHERE "+dst.quote("_fence")+" <= 0"); n != 0 {
			t.Errorf("%d target rows without a fence token", n)
		}
		// Verification narrows down to the rows, and repair rewrites and
		// deletes them, by the same quoted names.
		exec1(t, e.dstDB, fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s = 4", dst.quote(dstName), dst.quote("naïve"), dst.ph(1), dst.quote("Id")), "tampered")
		insertRows(t, dst, e.dstDB, dstName, []string{"Id", "naïve", "_fence"}, [][]any{{int64(1000), "extra", int64(1)}})
		v := runMigrate(t, "verify", "-p", plan, "--json")
		wantCode(t, v, 3)
		var rep struct {
			Tables []struct {
				Extra, Changed int64
			} `json:"tables"`
		}
		if err := json.Unmarshal([]byte(v.stdout), &rep); err != nil || len(rep.Tables) != 1 || rep.Tables[0].Extra != 1 || rep.Tables[0].Changed != 1 {
			t.Fatalf("verify: %+v (%v), want 1 changed and 1 extra row\n%s", rep, err, v)
		}
		wantCode(t, runMigrate(t, "repair", "-p", plan, "--delete-extra"), 0)
		if got := dump(t, dst, e.dstDB, dstName, tb.cols, tb.key); len(got) != len(want) || !slices.EqualFunc(got, want, func(a, b dumpRow) bool { return slices.Equal(a.vals, b.vals) }) {
			t.Errorf("the target differs from the source after repair")
		}
		var done int64
		q := fmt.Sprintf("SELECT count(*) FROM _migrate_checkpoint WHERE plan = %s AND tbl = %s AND state = 'done'", dst.ph(1), dst.ph(2))
		if err := e.dstDB.QueryRowContext(t.Context(), q, e.name, dstName).Scan(&done); err != nil || done != int64(shards) {
			t.Errorf("%d checkpoints of %q done (%v), want %d", done, dstName, err, shards)
		}
	})
}
