package main_test

// Whole databases (issue 14): the application fixture of
// testdata/fixture (a shop's 14 tables in each engine) copied by a plan
// with no tables list, in all four directions; the fixture's own
// "application" must then run unchanged on the target: it inserts without
// keys (sequences reset past the copied ids), relies on defaults, on the
// foreign keys' cascades and on the generated column, and its two
// violations must be refused by the target's foreign key and CHECK.

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// fixtureTables are the fixture's tables a plan copies (page_views, with
// neither a primary key nor a unique index, is excluded); the PostgreSQL
// fixture has a partitioned table too, the MySQL one the tables of its
// section "collations and auto-increment".
func fixtureTables(eng *engine) []string {
	tables := []string{"addresses", "audit_log", "CamelCaseNotes", "categories", "customers", "inventory", "order_items", "orders", "payments", "product_tags", "products", "tags", "warehouses",
		"suppliers", "gift_cards", "supplier_returns", // the section "unowned sequences and per-partition keys"
		"support_tickets"} // the section "views, functions, triggers"
	if eng == pgEngine {
		tables = append(tables, "shipments")
	}
	if eng == mysqlEngine {
		tables = append(tables, "bands", "genres", "tickets")
	}
	tables = append(tables, "devices") // unsigned keys, zero dates, bit and spatial
	return tables
}

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
	if e.src == mysqlEngine && e.dst == pgEngine {
		// MySQL's bit and point have no PostgreSQL mapping: the plan
		// names the types their values are converted to.
		return e.plan(t, planTable{name: "devices", types: map[string]string{"flags": "integer", "active": "boolean", "location": "bytea"}})
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
		for _, tb := range fixtureTables(e.src) {
			if !strings.Contains(r.stdout, tb+" -> ") {
				t.Errorf("validate does not list %s:\n%s", tb, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "page_views ->") || strings.Contains(r.stdout, "shipments_2024") {
			t.Errorf("validate lists the excluded page_views or a partition:\n%s", r.stdout)
		}
		same := e.src == e.dst
		if got := strings.Contains(r.stdout, "post-load creates view order_summaries") || strings.Contains(r.stdout, "post-load creates view public.order_summaries"); got != same {
			t.Errorf("validate lists the view the post-load phase creates: %v, want %v:\n%s", got, same, r.stdout)
		}
		if e.src == mysqlEngine && e.dst == pgEngine && !strings.Contains(r.stdout, "note, when migrate creates devices: column installed: default '0000-00-00' not created") {
			t.Errorf("validate does not say the zero-date default is not created:\n%s", r.stdout)
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
				Notes []string `json:"notes"`
			} `json:"tables"`
			PostLoad    []string `json:"post_load"`
			NotMigrated []string `json:"not_migrated"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &dry); err != nil {
			t.Fatalf("dry run JSON: %v\n%s", err, r.stdout)
		}
		if len(dry.Tables) != len(fixtureTables(e.src)) {
			t.Errorf("dry run has %d tables, want %d", len(dry.Tables), len(fixtureTables(e.src)))
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
		// Between two databases of one engine the views, routines and
		// triggers are created after the data, in dependency order, but
		// for the view reading the excluded page_views; across engines
		// they are reported as not migrated.
		notMigrated := strings.Join(dry.NotMigrated, "\n")
		objects := []string{"customer_totals", "orders_touch", "order_summaries", "big_order_summaries", "support_tickets_fill_code"}
		for _, o := range objects {
			if got := strings.Contains(notMigrated, o); got == same {
				t.Errorf("the dry run reports %s as not migrated: %v, want %v:\n%s", o, got, !same, notMigrated)
			}
		}
		if !strings.Contains(notMigrated, "recent_page_views") {
			t.Errorf("the dry run does not report the view on the excluded page_views:\n%s", notMigrated)
		}
		if same {
			postLoad := strings.Join(dry.PostLoad, "\n")
			at := func(what string) int {
				i := strings.Index(postLoad, what)
				if i < 0 {
					t.Errorf("the dry run's post-load phase lacks %q:\n%s", what, postLoad)
				}
				return i
			}
			fk := at("FOREIGN KEY")
			var fn, view, onView, trigger int
			if e.src == pgEngine {
				fn, view, onView, trigger = at("FUNCTION public.order_code"), at(`VIEW "public"."order_summaries"`), at(`VIEW "public"."big_order_summaries"`), at("TRIGGER support_tickets_fill_code")
				at(`MATERIALIZED VIEW "public"."customer_order_stats"`)
			} else {
				fn, view, onView, trigger = at("FUNCTION `order_code`"), at("VIEW `order_summaries`"), at("VIEW `big_order_summaries`"), at("TRIGGER support_tickets_fill_code")
			}
			if !(fk < fn && fn < view && view < onView && onView < trigger) {
				t.Errorf("post-load order: foreign keys %d, function %d, view %d, view on it %d, trigger %d:\n%s", fk, fn, view, onView, trigger, postLoad)
			}
			if strings.Contains(postLoad, "DEFINER=") || strings.Contains(postLoad, "recent_page_views") {
				t.Errorf("the post-load phase keeps a DEFINER or creates the view on the excluded table:\n%s", postLoad)
			}
		}
		if e.hasTable(t, "customers") {
			t.Fatal("the dry run created a table")
		}

		// The run.
		r = runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 0)
		var rep struct {
			ElapsedMs int64 `json:"elapsed_ms"`
			PostLoad  *struct {
				Sequences int   `json:"sequences"`
				Steps     int   `json:"steps"`
				Objects   int   `json:"objects"`
				ElapsedMs int64 `json:"elapsed_ms"`
			} `json:"post_load"`
			Notes       []string `json:"notes"`
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
		ddl := 0
		for _, tb := range dry.Tables {
			ddl += len(tb.DDL)
		}
		t.Logf("%s: %d tables found (1 refused), %d statements before the data, %d post-load statements (%d sequence resets, %d indexes and foreign keys), %d notes (%s), %d objects not migrated: %s; run %d ms, of which post-load %d ms",
			e.name, len(dry.Tables), ddl, len(dry.PostLoad), rep.PostLoad.Sequences, rep.PostLoad.Steps, len(rep.Notes), strings.Join(rep.Notes, "; "), len(rep.NotMigrated), strings.Join(rep.NotMigrated, "; "), rep.ElapsedMs, rep.PostLoad.ElapsedMs)
		if !slices.ContainsFunc(rep.NotMigrated, func(s string) bool {
			return strings.Contains(s, "recent_page_views") && (!same || strings.Contains(s, "page_views, which the plan does not copy"))
		}) {
			t.Errorf("the run's summary does not report the view on the excluded table: %v", rep.NotMigrated)
		}
		if same && rep.PostLoad.Objects < 6 {
			t.Errorf("the post-load phase created %d views, routines and triggers, want the fixture's 6 or more", rep.PostLoad.Objects)
		}
		if e.src == mysqlEngine && e.dst == pgEngine {
			// The unsigned AUTO_INCREMENT key is a bigint identity; bit and
			// point values are those of the named types.
			if typ := queryStrings(t, e.dstDB, "SELECT data_type || ' ' || is_identity FROM information_schema.columns WHERE table_name = 'devices' AND column_name = 'id'"); len(typ) != 1 || typ[0] != "bigint YES" {
				t.Errorf("devices.id is %v, want a bigint identity", typ)
			}
			got := queryStrings(t, e.dstDB, "SELECT flags || ' ' || active || ' ' || coalesce(encode(location, 'hex'), 'NULL') FROM devices WHERE id IN (3, 4) ORDER BY id")
			if want := []string{"111 false 01010000000000000000001240000000000000e8bf", "148 true NULL"}; !slices.Equal(got, want) {
				t.Errorf("devices rows 3 and 4: %q, want %q", got, want)
			}
		}
		if !same && !slices.ContainsFunc(rep.NotMigrated, func(s string) bool { return strings.Contains(s, "customer_totals") }) {
			t.Errorf("the run's summary does not report the view (not created across engines): %v", rep.NotMigrated)
		}

		if e.src == pgEngine {
			var dryNotes []string
			for _, tb := range dry.Tables {
				for _, n := range tb.Notes {
					dryNotes = append(dryNotes, tb.Table+": "+n)
				}
			}
			e.checkUnownedSequences(t, dryNotes, rep.Notes, dry.NotMigrated, rep.NotMigrated)
		}
		if e.src == mysqlEngine && e.dst == pgEngine && !slices.ContainsFunc(rep.Notes, func(n string) bool {
			return strings.HasPrefix(n, "supplier_returns: partitioned table (PARTITION BY RANGE")
		}) {
			t.Errorf("the run does not note that the partitioned supplier_returns is created plain: %q", rep.Notes)
		}
		if e.src == pgEngine && e.dst == pgEngine {
			if n := queryInt(t, e.dstDB, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'shipments'::regclass"); n != 2 {
				t.Errorf("the target's shipments has %d partitions, want 2", n)
			}
			if n := queryInt(t, e.dstDB, "SELECT count(*) FROM shipments_2025"); n != 120-101 {
				t.Errorf("partition shipments_2025 holds %d rows, want 19", n)
			}
		}

		// A table new in the source is found by the next run, copied, and
		// gets its indexes: the finished post-load phase runs again.
		exec1(t, e.srcDB, "CREATE TABLE coupons (id int NOT NULL PRIMARY KEY, code varchar(20) NOT NULL, CONSTRAINT coupons_code_key UNIQUE (code))")
		exec1(t, e.srcDB, "INSERT INTO coupons VALUES (1, 'A'), (2, 'B')")
		wantCode(t, runMigrate(t, "run", "-p", plan), 0)
		if n := queryInt(t, e.dstDB, "SELECT count(*) FROM coupons"); n != 2 {
			t.Errorf("the new table has %d rows in the target, want 2", n)
		}
		if _, err := e.dstDB.ExecContext(t.Context(), "INSERT INTO coupons (id, code) VALUES (3, 'A')"); err == nil {
			t.Error("the new table's unique index was not created")
		}

		// The application runs on the target, unchanged.
		if err := e.runApp(t, "app.sql"); err != nil {
			t.Fatalf("the application fails on the migrated %s database: %v", e.dst.name, err)
		}
		// Its inserts that a trigger completes, its views and functions:
		// where the post-load phase creates them.
		if err := e.runApp(t, "app_objects.sql"); same && err != nil {
			t.Errorf("the application's views, functions and triggers fail on the migrated %s database: %v", e.dst.name, err)
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

// checkUnownedSequences checks the fixture's section "unowned sequences
// and per-partition keys" (issue 25, items 7 and 8) after a run from
// PostgreSQL (the application's inserts without keys are in app.sql):
// the sequences the defaults use are created, not reported as not
// migrated; a partition's own index and foreign key are created on it
// between PostgreSQL databases, noted toward MySQL, by the dry run as by
// the run, as is the default nextval() of a column that is not the key.
func (e *env) checkUnownedSequences(t *testing.T, dryNotes, runNotes, dryNot, runNot []string) {
	t.Helper()
	for _, not := range [][]string{dryNot, runNot} {
		for _, o := range not {
			if strings.Contains(o, "GiftCard_Seq") || strings.Contains(o, "suppliers_supplier_id_seq") || strings.Contains(o, "gift_card_serial_seq") {
				t.Errorf("a sequence a copied default uses is reported as not migrated: %s", o)
			}
		}
	}
	if e.dst == pgEngine {
		if got := queryStrings(t, e.dstDB, `SELECT concat_ws(' ', data_type, start_value, increment_by, min_value, max_value, cycle) FROM pg_sequences WHERE sequencename = 'GiftCard_Seq'`); !slices.Equal(got, []string{"bigint 5 10 5 900000000 t"}) {
			t.Errorf(`"GiftCard_Seq" in the target: %q, want the source's bigint 5 10 5 900000000 t`, got)
		}
		if n := queryInt(t, e.dstDB, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'supplier_returns_2024'::regclass AND conname = 'supplier_returns_2024_supplier_fk'"); n != 1 {
			t.Errorf("the partition's own foreign key is missing in the target (%d)", n)
		}
		if n := queryInt(t, e.dstDB, "SELECT count(*) FROM pg_index WHERE indexrelid = to_regclass('supplier_returns_2024_supplier_idx') AND indrelid = 'supplier_returns_2024'::regclass"); n != 1 {
			t.Errorf("the partition's own index is missing in the target (%d)", n)
		}
		if _, err := e.dstDB.ExecContext(t.Context(), "INSERT INTO supplier_returns (return_id, returned_on, supplier_id) VALUES (9999, '2024-02-01', 9999)"); err == nil {
			t.Error("a return of no supplier was accepted: the partition's foreign key is missing")
		}
		return
	}
	for what, notes := range map[string][]string{"dry run": dryNotes, "run": runNotes} {
		all := strings.Join(notes, "\n")
		for _, w := range []string{"supplier_returns_2024_supplier_idx (supplier_id) of partition supplier_returns_2024", "supplier_returns_2024_supplier_fk (supplier_id) of partition supplier_returns_2024", "of column serial_no: not created, MySQL has no sequences"} {
			if !strings.Contains(all, w) {
				t.Errorf("the %s's notes do not say %q:\n%s", what, w, all)
			}
		}
	}
}

// A target the user created, with identity keys, foreign keys (one
// self-referencing, pointing forward in key order) and a generated column
// (a plain one in the source), is loaded without a foreign key violation —
// its foreign keys are dropped for the load and re-created after it —
// without writing the generated column, and its counters are set past the
// copied keys, so that the application's first insert without a key
// succeeds.
func TestRun_PreCreatedTarget(t *testing.T) {
	inDirections(t, directions, func(t *testing.T, e *env) {
		e.batchSize = 10
		for _, q := range []string{
			"CREATE TABLE parents (id bigint NOT NULL PRIMARY KEY, name varchar(100) NOT NULL)",
			"CREATE TABLE children (id bigint NOT NULL PRIMARY KEY, parent_id bigint NOT NULL, next_id bigint, name varchar(100), shout varchar(100))",
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
			exec1(t, e.srcDB, "INSERT INTO children VALUES ("+e.src.ph(1)+", "+e.src.ph(2)+", "+e.src.ph(3)+", "+e.src.ph(4)+", 'ignored')", i, 41-(i%40+1), next, fmt.Sprint("c", i))
		}
		ddl := map[string][]string{
			"postgres": {
				"CREATE TABLE parents (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, name text NOT NULL)",
				"CREATE TABLE children (id bigserial PRIMARY KEY, parent_id bigint NOT NULL CONSTRAINT children_parent_fk REFERENCES parents (id), next_id bigint CONSTRAINT children_next_fk REFERENCES children (id), name text, shout text GENERATED ALWAYS AS (upper(name)) STORED)",
			},
			"mysql": {
				"CREATE TABLE parents (id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, name varchar(100) NOT NULL) ENGINE=InnoDB",
				"CREATE TABLE children (id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, parent_id bigint NOT NULL, next_id bigint, name varchar(100), shout varchar(100) AS (upper(name)) STORED, CONSTRAINT children_parent_fk FOREIGN KEY (parent_id) REFERENCES parents (id), CONSTRAINT children_next_fk FOREIGN KEY (next_id) REFERENCES children (id)) ENGINE=InnoDB",
			},
		}
		for _, q := range ddl[e.dst.name] {
			exec1(t, e.dstDB, q)
		}
		plan := e.plan(t, planTable{name: "parents"}, planTable{name: "children", shards: 2}) // keys from the primary keys
		wantCode(t, runMigrate(t, "run", "-p", plan), 0)

		q := e.dst.quote
		if n := queryInt(t, e.dstDB, "SELECT count(*) FROM "+q("children")+" WHERE shout = upper(name)"); n != 60 {
			t.Errorf("%d rows of children have their generated column, want 60", n)
		}
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

// A holder SIGKILLed while its post-load phase creates an index: a
// standby takes the phase over once the lease expires, finishes every
// step (the one the dead holder was running is run again, or found done)
// and the application's foreign keys hold. The holder is caught inside
// the step, whatever the machine's speed: the test holds a lock on the
// target's order_items that its index's and foreign keys' DDL waits for,
// taken while the copy is still held at a gate (on audit_log, which the
// user created in the target beforehand), so the post-load phase cannot
// have passed it.
func TestPostLoad_HolderKilledTakeover(t *testing.T) {
	inDirections(t, sameEngine, func(t *testing.T, e *env) {
		e.loadFixture(t)
		e.leaseTTL = "3s"
		plan := e.wholePlan(t)
		auditLog := map[string]string{
			"postgres": "CREATE TABLE audit_log (event_id uuid NOT NULL UNIQUE, occurred_at timestamptz NOT NULL DEFAULT now(), actor varchar(100) NOT NULL DEFAULT 'system', action varchar(50) NOT NULL, entity varchar(50), entity_id bigint, detail text)",
			"mysql":    "CREATE TABLE audit_log (event_id char(36) NOT NULL UNIQUE, occurred_at timestamp(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), actor varchar(100) NOT NULL DEFAULT 'system', action varchar(50) NOT NULL, entity varchar(50), entity_id bigint, detail text) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci", // the source's collation: its keys are distinct under it
		}
		exec1(t, e.dstDB, auditLog[e.dst.name])
		g := newGate(t, e.dst, e.dstDB, "audit_log", "1 = 1")
		a := startMigrate(t, "run", "-p", plan, "--instance", "a")
		g.waitHeld(t, a, 1)
		dst := holdTable(t, e.dst, e.dstDB, "order_items", false)
		g.open(t, 0)
		waitUntil(t, a, "a post-load CREATE INDEX or ALTER TABLE waits on order_items", func() bool {
			return waiting(t, e.dst, e.dstDB, "%order_items%")
		})
		b := startMigrate(t, "run", "-p", plan, "--instance", "b", "--json")
		waitUntil(t, b, "b waits as the post-load phase's standby", func() bool {
			return strings.Contains(b.stderr.String(), "the post-load phase is held by another instance")
		})
		a.kill(t)
		dst.release(t)

		r := b.wait(t)
		wantCode(t, r, 0)
		var rep struct {
			PostLoad *struct {
				Steps   int  `json:"steps"`
				ByOther bool `json:"by_other"`
			} `json:"post_load"`
			Takeovers []struct {
				Table         string `json:"table"`
				PreviousOwner string `json:"previous_owner"`
				RtoMs         int64  `json:"rto_ms"`
			} `json:"takeovers"`
			Verify struct {
				Equal bool `json:"equal"`
			} `json:"verify"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("run JSON: %v\n%s", err, r.stdout)
		}
		if rep.PostLoad == nil || rep.PostLoad.ByOther || rep.PostLoad.Steps < 1 || !rep.Verify.Equal {
			t.Fatalf("b's report: post_load %+v, verify equal %v\n%s", rep.PostLoad, rep.Verify.Equal, r.stderr)
		}
		if len(rep.Takeovers) != 1 || rep.Takeovers[0].Table != "_postload" || !strings.HasPrefix(rep.Takeovers[0].PreviousOwner, "a-") {
			t.Errorf("b's takeovers: %+v, want the post-load phase's from a", rep.Takeovers)
		}
		if n := queryInt(t, e.dstDB, "SELECT count(*) FROM _migrate_postload WHERE state <> 'done'"); n != 0 {
			t.Errorf("%d post-load steps not done", n)
		}
		if err := e.runApp(t, "app_fk_violation.sql"); err == nil {
			t.Error("the foreign key violation was accepted: the post-load phase did not finish")
		}
		if err := e.runApp(t, "app.sql"); err != nil {
			t.Errorf("the application fails on the target: %v", err)
		}
	})
}

// held is a table lock a test holds on its own connection.
type held struct {
	conn    *sql.Conn
	release func(t *testing.T)
}

// holdTable locks a table on its own connection until release: against
// reads and writes (exclusive), or against DDL only.
func holdTable(t *testing.T, eng *engine, db *sql.DB, table string, exclusive bool) *held {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	q := eng.quote(table)
	var lock []string
	end := "ROLLBACK"
	switch {
	case eng == pgEngine && exclusive:
		lock = []string{"BEGIN", "LOCK TABLE " + q + " IN ACCESS EXCLUSIVE MODE"}
	case eng == pgEngine:
		lock = []string{"BEGIN", "LOCK TABLE " + q + " IN ROW EXCLUSIVE MODE"} // conflicts with CREATE INDEX and ALTER TABLE, not with writes
	case exclusive:
		lock, end = []string{"LOCK TABLES " + q + " WRITE"}, "UNLOCK TABLES" // reads wait on its metadata lock
	default:
		lock = []string{"START TRANSACTION", "SELECT 1 FROM " + q + " LIMIT 1"} // a shared metadata lock until the transaction ends: DDL waits
	}
	for _, stmt := range lock {
		if _, err := conn.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return &held{conn: conn, release: func(t *testing.T) {
		t.Helper()
		if _, err := conn.ExecContext(t.Context(), end); err != nil {
			t.Fatalf("%s: %v", end, err)
		}
	}}
}

// waiting reports whether a statement like pattern (a LIKE pattern) waits
// on a lock in db.
func waiting(t *testing.T, eng *engine, db *sql.DB, pattern string) bool {
	t.Helper()
	if eng == pgEngine {
		return queryInt(t, db, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1", pattern) > 0
	}
	return queryInt(t, db, "SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE() AND state LIKE 'Waiting for table metadata lock%' AND info LIKE ?", pattern) > 0
}

// waitUntil waits for cond while p runs, at most a minute.
func waitUntil(t *testing.T, p *proc, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case <-p.done:
			t.Fatalf("migrate exited before %s: %s", what, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not seen within a minute: %s\n%s", what, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
