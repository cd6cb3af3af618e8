package main_test

// Whole databases (issue 14): the application fixture of
// testdata/fixture (a shop's 14 tables in each engine) copied by a plan
// with no tables list, in all four directions; the fixture's own
// "application" must then run unchanged on the target: it inserts without
// keys (sequences reset past the copied ids), relies on defaults, on the
// foreign keys' cascades and on the generated column, and its two
// violations must be refused by the target's foreign key and CHECK.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// fixtureTables are the fixture's tables a plan copies (page_views, with
// neither a primary key nor a unique index, is excluded).
var fixtureTables = []string{"addresses", "audit_log", "CamelCaseNotes", "categories", "customers", "inventory", "order_items", "orders", "payments", "product_tags", "products", "tags", "warehouses"}

// fixture reads a file of the application fixture for an engine.
func fixture(t *testing.T, eng *engine, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixture", eng.name, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loadFixture creates the fixture's schema and rows in e's source.
func (e *env) loadFixture(t *testing.T) {
	t.Helper()
	if err := testsvc.RunScript(t, e.srcURL, fixture(t, e.src, "schema.sql")); err != nil {
		t.Fatalf("load the %s fixture: %v", e.src.name, err)
	}
}

// wholePlan writes a plan copying every table of the fixture but
// page_views; toward MySQL PostgreSQL's unbounded numeric (the generated
// price_with_tax) needs its type named, in a table entry that overrides
// only that.
func (e *env) wholePlan(t *testing.T) string {
	t.Helper()
	e.extra = "exclude: [page_views]\n"
	if e.src == pgEngine && e.dst == mysqlEngine {
		return e.plan(t, planTable{name: "public.products", types: map[string]string{"price_with_tax": "decimal(14,4)"}})
	}
	return e.plan(t)
}

// runApp runs one of the fixture's application scripts on e's target.
func (e *env) runApp(t *testing.T, name string) error {
	t.Helper()
	return testsvc.RunScript(t, e.dstURL, fixture(t, e.dst, name))
}

func TestWholeDatabase(t *testing.T) {
	inDirections(t, directions, func(t *testing.T, e *env) {
		e.loadFixture(t)

		// A table without a key is refused by name, before anything is
		// written, with what to do about it.
		e.extra = ""
		r := runMigrate(t, "validate", "-p", e.plan(t))
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "page_views has no primary key and no unique index") || !strings.Contains(r.stderr, "exclude:") {
			t.Fatalf("the keyless table is not named with the way out:\n%s", r.stderr)
		}
		plan := e.wholePlan(t)
		r = runMigrate(t, "validate", "-p", plan)
		wantCode(t, r, 0)
		for _, tb := range fixtureTables {
			if !strings.Contains(r.stdout, tb+" -> ") {
				t.Errorf("validate does not list %s:\n%s", tb, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "page_views") {
			t.Errorf("validate lists the excluded page_views:\n%s", r.stdout)
		}

		// The dry run lists every statement in order and what is not
		// migrated, and writes nothing.
		r = runMigrate(t, "run", "-p", plan, "--dry-run", "--json")
		wantCode(t, r, 0)
		var dry struct {
			Tables []struct {
				Table string   `json:"table"`
				Key   []string `json:"key"`
				DDL   []string `json:"ddl"`
			} `json:"tables"`
			PostLoad    []string `json:"post_load"`
			NotMigrated []string `json:"not_migrated"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &dry); err != nil {
			t.Fatalf("dry run JSON: %v\n%s", err, r.stdout)
		}
		if len(dry.Tables) != len(fixtureTables) {
			t.Errorf("dry run has %d tables, want %d", len(dry.Tables), len(fixtureTables))
		}
		for _, tb := range dry.Tables {
			if strings.HasSuffix(tb.Table, "audit_log") && !slices.Equal(tb.Key, []string{"event_id"}) {
				t.Errorf("audit_log's key %v, want its unique NOT NULL index [event_id]", tb.Key)
			}
			if !slices.ContainsFunc(tb.DDL, func(q string) bool { return strings.HasPrefix(q, "CREATE TABLE") }) {
				t.Errorf("the dry run would not create %s: %v", tb.Table, tb.DDL)
			}
		}
		fks := 0
		for _, q := range dry.PostLoad {
			if strings.Contains(q, "FOREIGN KEY") {
				fks++
			}
		}
		if fks < 10 {
			t.Errorf("the dry run's post-load phase has %d foreign keys, want the fixture's 14 or more:\n%s", fks, strings.Join(dry.PostLoad, "\n"))
		}
		notMigrated := strings.Join(dry.NotMigrated, "\n")
		for _, o := range []string{"customer_totals", "orders_touch"} {
			if !strings.Contains(notMigrated, o) {
				t.Errorf("the dry run does not report %s as not migrated:\n%s", o, notMigrated)
			}
		}
		if e.hasTable(t, "customers") {
			t.Fatal("the dry run created a table")
		}

		// The run.
		r = runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 0)
		var rep struct {
			PostLoad *struct {
				Sequences int `json:"sequences"`
				Steps     int `json:"steps"`
			} `json:"post_load"`
			NotMigrated []string `json:"not_migrated"`
			Verify      struct {
				Equal bool `json:"equal"`
			} `json:"verify"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("run JSON: %v\n%s", err, r.stdout)
		}
		if rep.PostLoad == nil || rep.PostLoad.Steps < fks || rep.PostLoad.Sequences < 8 || !rep.Verify.Equal {
			t.Fatalf("run report: post_load %+v, verify equal %v\n%s", rep.PostLoad, rep.Verify.Equal, r.stdout)
		}
		if !slices.ContainsFunc(rep.NotMigrated, func(s string) bool { return strings.Contains(s, "customer_totals") }) {
			t.Errorf("the run's summary does not report the view: %v", rep.NotMigrated)
		}

		// The application runs on the target, unchanged.
		if err := e.runApp(t, "app.sql"); err != nil {
			t.Fatalf("the application fails on the migrated %s database: %v", e.dst.name, err)
		}
		for _, bad := range []string{"app_fk_violation.sql", "app_check_violation.sql"} {
			if err := e.runApp(t, bad); err == nil {
				t.Errorf("%s succeeded on the migrated database: the constraint was not created", bad)
			}
		}

		// Run again: nothing to do, and the foreign keys stay.
		wantCode(t, runMigrate(t, "run", "-p", plan), 0)
		if err := e.runApp(t, "app_fk_violation.sql"); err == nil {
			t.Error("a second run lost the foreign keys")
		}
	})
}

// A target the user created, with identity keys and foreign keys (one
// self-referencing, pointing forward in key order), is loaded without a
// foreign key violation — its foreign keys are dropped for the load and
// re-created after it — and its counters are set past the copied keys, so
// that the application's first insert without a key succeeds.
func TestRun_PreCreatedTarget(t *testing.T) {
	inDirections(t, directions, func(t *testing.T, e *env) {
		e.batchSize = 10
		for _, q := range []string{
			"CREATE TABLE parents (id bigint NOT NULL PRIMARY KEY, name varchar(100) NOT NULL)",
			"CREATE TABLE children (id bigint NOT NULL PRIMARY KEY, parent_id bigint NOT NULL, next_id bigint, name varchar(100))",
		} {
			exec1(t, e.srcDB, q)
		}
		for i := 1; i <= 40; i++ {
			exec1(t, e.srcDB, "INSERT INTO parents VALUES ("+e.src.ph(1)+", "+e.src.ph(2)+")", i, fmt.Sprint("p", i))
		}
		for i := 1; i <= 60; i++ {
			var next any = i + 1 // a row refers to the next one: loaded in key order, its parent comes later
			if i == 60 {
				next = nil
			}
			exec1(t, e.srcDB, "INSERT INTO children VALUES ("+e.src.ph(1)+", "+e.src.ph(2)+", "+e.src.ph(3)+", "+e.src.ph(4)+")", i, 41-(i%40+1), next, fmt.Sprint("c", i))
		}
		ddl := map[string][]string{
			"postgres": {
				"CREATE TABLE parents (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, name text NOT NULL)",
				"CREATE TABLE children (id bigserial PRIMARY KEY, parent_id bigint NOT NULL CONSTRAINT children_parent_fk REFERENCES parents (id), next_id bigint CONSTRAINT children_next_fk REFERENCES children (id), name text)",
			},
			"mysql": {
				"CREATE TABLE parents (id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, name varchar(100) NOT NULL) ENGINE=InnoDB",
				"CREATE TABLE children (id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, parent_id bigint NOT NULL, next_id bigint, name varchar(100), CONSTRAINT children_parent_fk FOREIGN KEY (parent_id) REFERENCES parents (id), CONSTRAINT children_next_fk FOREIGN KEY (next_id) REFERENCES children (id)) ENGINE=InnoDB",
			},
		}
		for _, q := range ddl[e.dst.name] {
			exec1(t, e.dstDB, q)
		}
		plan := e.plan(t, planTable{name: "parents"}, planTable{name: "children", shards: 2}) // keys from the primary keys
		wantCode(t, runMigrate(t, "run", "-p", plan), 0)

		q := e.dst.quote
		exec1(t, e.dstDB, "INSERT INTO "+q("parents")+" (name) VALUES ('new')")
		exec1(t, e.dstDB, "INSERT INTO "+q("children")+" (parent_id, name) VALUES (1, 'new')")
		if got := queryInt(t, e.dstDB, "SELECT max(id) FROM "+q("parents")); got != 41 {
			t.Errorf("the new parent got id %d, want 41", got)
		}
		if got := queryInt(t, e.dstDB, "SELECT max(id) FROM "+q("children")); got != 61 {
			t.Errorf("the new child got id %d, want 61", got)
		}
		for _, bad := range []string{
			"INSERT INTO " + q("children") + " (parent_id, name) VALUES (9999, 'orphan')",
			"INSERT INTO " + q("children") + " (parent_id, next_id, name) VALUES (1, 9999, 'dangling')",
		} {
			if _, err := e.dstDB.ExecContext(t.Context(), bad); err == nil {
				t.Errorf("%s: accepted; the foreign key was not re-created", bad)
			}
		}
		wantCode(t, runMigrate(t, "run", "-p", plan), 0) // a finished plan run again keeps them
		if _, err := e.dstDB.ExecContext(t.Context(), "INSERT INTO "+q("children")+" (parent_id, name) VALUES (9999, 'orphan')"); err == nil {
			t.Error("a second run lost the foreign key")
		}
	})
}
