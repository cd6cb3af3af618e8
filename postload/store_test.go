package postload

import (
	"database/sql"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// target is a fresh database of one engine for one test.
type target struct {
	db  *sql.DB
	d   dialect.Dialect
	dsn plans.DSN
}

// ph is the i-th bind parameter (from 1) in the engine's spelling.
func (tg target) ph(i int) string {
	if tg.d.Engine() == plans.Postgres {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}

// table names a table of the test's database as the plan names it:
// public.<name> in PostgreSQL, <name> in MySQL.
func (tg target) table(name string) string {
	if tg.d.Engine() == plans.Postgres {
		return "public." + name
	}
	return name
}

// schema is the condition on information_schema's table_schema that
// selects the test's database.
func (tg target) schema() string {
	if tg.d.Engine() == plans.Postgres {
		return "table_schema = 'public'"
	}
	return "table_schema = DATABASE()"
}

func (tg target) exec(t *testing.T, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := tg.db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// tableExists asks the catalog whether table (as the plan names it) exists.
func (tg target) tableExists(t *testing.T, table string) bool {
	t.Helper()
	q, args := tg.d.TableExists(plans.Table{Target: table}.TargetIdent())
	var ok bool
	if err := tg.db.QueryRowContext(t.Context(), q, args...).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// indexExists asks the catalog whether table has an index name.
func (tg target) indexExists(t *testing.T, table, name string) bool {
	t.Helper()
	q := `SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name = ?`
	if tg.d.Engine() == plans.Postgres {
		q = `SELECT count(*) FROM pg_catalog.pg_indexes WHERE schemaname = 'public' AND tablename = $1 AND indexname = $2`
	}
	var n int
	if err := tg.db.QueryRowContext(t.Context(), q, table, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// foreignKeyExists asks the catalog whether table has a foreign key name.
func (tg target) foreignKeyExists(t *testing.T, table, name string) bool {
	t.Helper()
	q := `SELECT COUNT(*) FROM information_schema.table_constraints WHERE ` + tg.schema() +
		` AND constraint_type = 'FOREIGN KEY' AND table_name = ` + tg.ph(1) + ` AND constraint_name = ` + tg.ph(2)
	var n int
	if err := tg.db.QueryRowContext(t.Context(), q, table, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// forEachTarget runs fn against a fresh database of every engine, through
// a pool with the session settings of a 30s lease; with helpers, the
// database holds migrate's helper tables (the post-load steps' among them).
func forEachTarget(t *testing.T, helpers bool, fn func(t *testing.T, tg target)) {
	t.Helper()
	for _, e := range testsvc.Engines { // the steps live in the target
		t.Run(e.Name, func(t *testing.T) {
			dsn, err := plans.ParseDSN(e.NewDB(t))
			if err != nil {
				t.Fatal(err)
			}
			d, err := dialect.For(dsn.Engine())
			if err != nil {
				t.Fatal(err)
			}
			db, d, err := dialect.Open(t.Context(), d, dsn, dialect.SessionFor(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			tg := target{db: db, d: d, dsn: dsn}
			if helpers {
				tg.exec(t, d.Helpers()...)
			}
			fn(t, tg)
		})
	}
}

// step is what identifies a recorded step, and its state, for comparisons.
type step struct {
	Seq    int
	Kind   string
	Target string
	Name   string
	State  string
}

func stepsOf(steps Steps) []step {
	out := make([]step, len(steps))
	for i, s := range steps {
		out[i] = step{s.Seq, s.Kind, s.Target, s.Name, s.State}
	}
	return out
}

func mustList(t *testing.T, s Store, q dialect.Querier) Steps {
	t.Helper()
	steps, err := s.List(t.Context(), q)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return steps
}

func mustRecord(t *testing.T, s Store, db dialect.DB, tables []TableSteps, objects []dialect.Step, recorded Steps) {
	t.Helper()
	if err := s.Record(t.Context(), db, tables, objects, recorded); err != nil {
		t.Fatalf("record: %v", err)
	}
}

func wantSteps(t *testing.T, got Steps, want []step) {
	t.Helper()
	if g := stepsOf(got); !reflect.DeepEqual(g, want) {
		t.Errorf("steps\n got %+v\nwant %+v", g, want)
	}
}

// indexStep and the others are steps as setup records them; the store
// never runs them.
func indexStep(name string) dialect.Step {
	return dialect.Step{Kind: dialect.StepIndex, Name: name, SQL: "CREATE INDEX " + name + " ON t (a)",
		Exists: "SELECT to_regclass($1) IS NOT NULL", ExistsArgs: []any{"public." + name}}
}

func fkStep(name string) dialect.Step {
	return dialect.Step{Kind: dialect.StepForeignKey, Name: name, SQL: "ALTER TABLE t ADD CONSTRAINT " + name + " FOREIGN KEY (a) REFERENCES p (id)",
		Exists: "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conrelid = $1::regclass AND conname = $2)", ExistsArgs: []any{"t", name}}
}

func objectStep(kind, name string) dialect.Step {
	return dialect.Step{Kind: kind, Name: name, SQL: "CREATE " + kind + " " + name, Exists: "SELECT 1 = 1"}
}

func TestStore_Record(t *testing.T) {
	forEachTarget(t, true, func(t *testing.T, tg target) {
		s := Store{Plan: testsvc.Prefix(t), SQL: tg.d}
		orders := TableSteps{Target: "public.orders", Steps: []dialect.Step{indexStep("orders_customer_idx"), fkStep("orders_customer_fk")}}
		view := objectStep(dialect.StepView, "order_totals")
		mustRecord(t, s, tg.db, []TableSteps{orders}, []dialect.Step{view}, nil)
		first := mustList(t, s, tg.db)
		wantSteps(t, first, []step{
			{0, dialect.PostLoadPhase, "", "", Pending},
			{1, dialect.StepIndex, "public.orders", "orders_customer_idx", Pending},
			{2, dialect.StepForeignKey, "public.orders", "orders_customer_fk", Pending},
			{3, dialect.StepView, "", "order_totals", Pending},
		})
		if got := first[1]; got.SQL != orders.Steps[0].SQL || got.Exists != orders.Steps[0].Exists ||
			!reflect.DeepEqual(got.ExistsArgs, []any{"public.orders_customer_idx"}) || !reflect.DeepEqual(got.Table, []string{"public", "orders"}) {
			t.Errorf("index step read back as %+v, want the recorded %+v on [public orders]", got, orders.Steps[0])
		}
		if got := first[3]; got.ExistsArgs == nil || len(got.ExistsArgs) != 0 {
			t.Errorf("a step recorded without exists args reads back %#v, want []any{}", got.ExistsArgs)
		}
		if first.State() != Pending {
			t.Errorf("phase state %q, want %q", first.State(), Pending)
		}

		// A second setup (another instance, a later run of a discovering
		// plan) records what it prepared again, after what the first did.
		items := TableSteps{Target: "public.items", Steps: []dialect.Step{
			indexStep("items_sku_idx"),
			indexStep("orders_customer_idx"), // the same name on another table is another step
			fkStep("items_sku_idx"),          // and so is another kind
		}}
		trigger := objectStep(dialect.StepTrigger, "orders_audit")
		mustRecord(t, s, tg.db, []TableSteps{orders, items}, []dialect.Step{view, trigger}, first)
		second := mustList(t, s, tg.db)
		wantSteps(t, second, []step{
			{0, dialect.PostLoadPhase, "", "", Pending},
			{1, dialect.StepIndex, "public.orders", "orders_customer_idx", Pending},
			{4, dialect.StepIndex, "public.items", "items_sku_idx", Pending},
			{5, dialect.StepIndex, "public.items", "orders_customer_idx", Pending},
			{2, dialect.StepForeignKey, "public.orders", "orders_customer_fk", Pending},
			{6, dialect.StepForeignKey, "public.items", "items_sku_idx", Pending},
			{3, dialect.StepView, "", "order_totals", Pending},
			{7, dialect.StepTrigger, "", "orders_audit", Pending},
		})

		// Nothing new: nothing recorded, and the phase row stays one.
		mustRecord(t, s, tg.db, []TableSteps{items, orders}, []dialect.Step{trigger, view}, second)
		wantSteps(t, mustList(t, s, tg.db), stepsOf(second))
		var phases int
		q := `SELECT COUNT(*) FROM ` + tg.d.Quote(dialect.PostLoadTable) + ` WHERE plan = ` + tg.ph(1) + ` AND seq = 0`
		if err := tg.db.QueryRowContext(t.Context(), q, s.Plan).Scan(&phases); err != nil {
			t.Fatal(err)
		}
		if phases != 1 {
			t.Errorf("%d phase rows, want 1", phases)
		}

		t.Run("a step twice in one record is stored once", func(t *testing.T) {
			s := Store{Plan: testsvc.Prefix(t), SQL: tg.d}
			x := indexStep("dup_idx")
			mustRecord(t, s, tg.db, []TableSteps{{Target: "public.a", Steps: []dialect.Step{x, x}}, {Target: "public.a", Steps: []dialect.Step{x}}},
				[]dialect.Step{view, view}, nil)
			wantSteps(t, mustList(t, s, tg.db), []step{
				{0, dialect.PostLoadPhase, "", "", Pending},
				{1, dialect.StepIndex, "public.a", "dup_idx", Pending},
				{2, dialect.StepView, "", "order_totals", Pending},
			})
		})
		t.Run("plans do not share steps", func(t *testing.T) {
			other := Store{Plan: testsvc.Prefix(t), SQL: tg.d}
			if steps := mustList(t, other, tg.db); len(steps) != 0 {
				t.Errorf("another plan lists %d steps, want none", len(steps))
			}
		})
	})
}

func TestStore_RecordedWithoutTable(t *testing.T) {
	forEachTarget(t, false, func(t *testing.T, tg target) {
		s := Store{Plan: testsvc.Prefix(t), SQL: tg.d}
		steps, err := s.Recorded(t.Context(), tg.db)
		if err != nil || steps != nil {
			t.Errorf("Recorded without the steps' table = %v, %v; want nil, nil", steps, err)
		}
		if n, err := s.Resume(t.Context(), tg.db); n != 0 || err != nil {
			t.Errorf("Resume without the steps' table = %d, %v; want 0, nil", n, err)
		}
		p := &Phase{Plan: &plans.Plan{Name: s.Plan}, Store: s, SQL: tg.d, Target: tg.db}
		if f, err := p.Look(t.Context()); err != nil || f.State != Done {
			t.Errorf("Look of a plan set up without the phase = %+v, %v; want done", f, err)
		}
		if err := s.Record(t.Context(), tg.db, nil, nil, nil); err == nil {
			t.Error("Record without the steps' table succeeded")
		}
	})
}

func TestStore_RecordReopens(t *testing.T) {
	forEachTarget(t, true, func(t *testing.T, tg target) {
		ctx := t.Context()
		s := Store{Plan: testsvc.Prefix(t), SQL: tg.d}
		orders := TableSteps{Target: "public.orders", Steps: []dialect.Step{indexStep("orders_idx")}}
		mustRecord(t, s, tg.db, []TableSteps{orders}, nil, nil)
		if err := s.MarkDone(ctx, tg.db, 7, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.SetState(ctx, tg.db, Done, 7); err != nil {
			t.Fatal(err)
		}

		mustRecord(t, s, tg.db, []TableSteps{orders}, nil, mustList(t, s, tg.db))
		if st := mustList(t, s, tg.db).State(); st != Done {
			t.Fatalf("done phase after recording nothing new is %q, want done", st)
		}

		// Discovery adds a table: its steps reopen the phase.
		items := TableSteps{Target: "public.items", Steps: []dialect.Step{indexStep("items_idx")}}
		mustRecord(t, s, tg.db, []TableSteps{orders, items}, nil, mustList(t, s, tg.db))
		steps := mustList(t, s, tg.db)
		wantSteps(t, steps, []step{
			{0, dialect.PostLoadPhase, "", "", Pending},
			{1, dialect.StepIndex, "public.orders", "orders_idx", Done},
			{2, dialect.StepIndex, "public.items", "items_idx", Pending},
		})

		// So does a schema object new to a done phase.
		if err := s.SetState(ctx, tg.db, Done, 8); err != nil {
			t.Fatal(err)
		}
		mustRecord(t, s, tg.db, []TableSteps{orders, items}, []dialect.Step{objectStep(dialect.StepView, "v")}, mustList(t, s, tg.db))
		if st := mustList(t, s, tg.db).State(); st != Pending {
			t.Errorf("done phase after a new view is %q, want pending", st)
		}
	})
}

func TestStore_Resume(t *testing.T) {
	forEachTarget(t, true, func(t *testing.T, tg target) {
		ctx := t.Context()
		s := Store{Plan: testsvc.Prefix(t), SQL: tg.d}
		resume := func(want int64) {
			t.Helper()
			n, err := s.Resume(ctx, tg.db)
			if err != nil || n != want {
				t.Errorf("Resume = %d, %v; want %d", n, err, want)
			}
		}
		resume(0) // nothing recorded for the plan
		mustRecord(t, s, tg.db, []TableSteps{{Target: "public.orders", Steps: []dialect.Step{indexStep("orders_idx")}}}, nil, nil)
		resume(0) // pending
		for _, st := range []string{Running, Done} {
			if err := s.SetState(ctx, tg.db, st, 3); err != nil {
				t.Fatal(err)
			}
			resume(0)
			if got := mustList(t, s, tg.db).State(); got != st {
				t.Errorf("Resume changed a %s phase to %s", st, got)
			}
		}
		if err := s.SetState(ctx, tg.db, Halted, 4); err != nil {
			t.Fatal(err)
		}
		resume(1)
		if got := mustList(t, s, tg.db).State(); got != Pending {
			t.Errorf("resumed phase is %s, want pending", got)
		}
		resume(0)
	})
}
