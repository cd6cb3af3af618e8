package postload

import (
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
)

// indexOn is the step creating index name on table t(a), with the check
// the engine's dialect records for it.
func (tg target) indexOn(name string) dialect.Step {
	st := dialect.Step{Kind: dialect.StepIndex, Table: []string{"t"}, Name: name, SQL: "CREATE INDEX " + name + " ON t (a)"}
	if tg.d.Engine() == plans.Postgres {
		st.Exists, st.ExistsArgs = `SELECT to_regclass($1) IS NOT NULL`, []any{"public." + name}
	} else {
		st.Exists = `SELECT COUNT(*) > 0 FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name = ?`
		st.ExistsArgs = []any{"t", name}
	}
	return st
}

func TestRunStep(t *testing.T) {
	forEachTarget(t, false, func(t *testing.T, tg target) {
		ctx := t.Context()
		tg.exec(t, "CREATE TABLE t (a int)")

		t.Run("runs a step whose object is missing", func(t *testing.T) {
			if err := runStep(ctx, tg.db, tg.indexOn("t_new_idx")); err != nil {
				t.Fatal(err)
			}
			if !tg.indexExists(t, "t", "t_new_idx") {
				t.Error("the index was not created")
			}
		})

		t.Run("skips a step whose object exists", func(t *testing.T) {
			tg.exec(t, "CREATE INDEX t_a_idx ON t (a)")
			st := tg.indexOn("t_a_idx")
			st.SQL = "CREATE TABLE marker (x int)" // would leave a trace if run
			if err := runStep(ctx, tg.db, st); err != nil {
				t.Fatal(err)
			}
			if tg.tableExists(t, "marker") {
				t.Error("the step's SQL ran though its object exists")
			}
		})

		t.Run("a failing step whose object is missing is an error naming it", func(t *testing.T) {
			st := tg.indexOn("t_bad_idx")
			st.SQL = "CREATE INDEX t_bad_idx ON no_such_table (a)"
			err := runStep(ctx, tg.db, st)
			if err == nil || !strings.Contains(err.Error(), "post-load index t_bad_idx") || !strings.Contains(err.Error(), st.SQL) {
				t.Errorf("runStep = %v, want an error naming post-load index t_bad_idx and its statement", err)
			}
		})

		t.Run("a step without an exists check that fails is an error", func(t *testing.T) {
			st := dialect.Step{Kind: dialect.StepSequence, Name: "a", SQL: "UPDATE no_such_table SET a = 1"}
			if err := runStep(ctx, tg.db, st); err == nil || !strings.Contains(err.Error(), "post-load sequence a") {
				t.Errorf("runStep = %v, want an error naming post-load sequence a", err)
			}
		})

		t.Run("an exists check that fails is an error and nothing runs", func(t *testing.T) {
			st := tg.indexOn("t_x_idx")
			st.Exists = "SELECT no_such_column FROM t"
			st.SQL = "CREATE TABLE marker (x int)"
			if err := runStep(ctx, tg.db, st); err == nil {
				t.Error("runStep succeeded though its exists check failed")
			}
			if tg.tableExists(t, "marker") {
				t.Error("the step's SQL ran though its exists check failed")
			}
		})

		t.Run("a value step substitutes n", func(t *testing.T) {
			st := dialect.Step{Kind: dialect.StepSequence, Name: "n", Value: "SELECT 40 + " + tg.ph(1), ValueArgs: []any{2},
				SQL: "CREATE TABLE v_{{n}} (x int)"}
			if err := runStep(ctx, tg.db, st); err != nil {
				t.Fatal(err)
			}
			if !tg.tableExists(t, "v_42") {
				t.Error("table v_42 was not created: {{n}} not replaced by the value 42")
			}
			st.Value, st.SQL = "SELECT no_such_column FROM t", "CREATE TABLE marker (x int)"
			if err := runStep(ctx, tg.db, st); err == nil || !strings.Contains(err.Error(), "post-load sequence n") || !strings.Contains(err.Error(), st.Value) {
				t.Errorf("runStep with a failing value query = %v, want an error naming the step and its query", err)
			}
			if tg.tableExists(t, "marker") {
				t.Error("the step's SQL ran though its value query failed")
			}
		})

		t.Run("the real counter step sets the counter", func(t *testing.T) {
			if tg.d.Engine() != plans.MySQL {
				t.Skip("the {{n}} substitution is MySQL's AUTO_INCREMENT")
			}
			tg.exec(t, "CREATE TABLE ai (id bigint AUTO_INCREMENT PRIMARY KEY)", "INSERT INTO ai (id) VALUES (7)")
			def, err := tg.d.ReadTable(ctx, tg.db, []string{"ai"})
			if err != nil {
				t.Fatal(err)
			}
			def.Columns[0].Next = 500 // the source's counter
			steps := tg.d.SequenceSteps(def)
			if len(steps) != 1 || steps[0].Value == "" {
				t.Fatalf("sequence steps %+v, want one with a value query", steps)
			}
			if err := runStep(ctx, tg.db, steps[0]); err != nil {
				t.Fatal(err)
			}
			res, err := tg.db.ExecContext(ctx, "INSERT INTO ai () VALUES ()")
			if err != nil {
				t.Fatal(err)
			}
			if id, _ := res.LastInsertId(); id != 500 {
				t.Errorf("next id %d, want 500", id)
			}
		})

		// Another holder creates the object while this one's statement
		// waits for the table: the statement then fails (the object
		// exists), and the step is done all the same.
		t.Run("a step whose object another holder created meanwhile is done", func(t *testing.T) {
			lockConn, err := tg.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer lockConn.Close()
			lock, create, unlock := []string{"LOCK TABLES t WRITE"}, "CREATE INDEX t_race_idx ON t (a)", "UNLOCK TABLES"
			// the step's own statement, not its exists check, waits
			waiting := `SELECT COUNT(*) FROM information_schema.processlist WHERE db = DATABASE() AND state LIKE 'Waiting for table metadata lock%' AND info LIKE 'CREATE INDEX t_race_idx%'`
			if tg.d.Engine() == plans.Postgres {
				lock, unlock = []string{"BEGIN", "LOCK TABLE t IN ACCESS EXCLUSIVE MODE"}, "COMMIT"
				waiting = `SELECT count(*) FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE NOT l.granted AND l.relation = to_regclass('public.t') AND a.datname = current_database() AND a.query LIKE 'CREATE INDEX t_race_idx%'`
			}
			for _, q := range lock {
				if _, err := lockConn.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			done := make(chan error, 1)
			go func() { done <- runStep(ctx, tg.db, tg.indexOn("t_race_idx")) }()
			for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
				var n int
				if err := tg.db.QueryRowContext(ctx, waiting).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					break
				}
				select {
				case err := <-done:
					t.Fatalf("runStep ended (%v) before its statement waited for the table", err)
				default:
				}
				if time.Since(start) > 10*time.Second {
					t.Fatal("the step's statement never waited for the table lock")
				}
			}
			for _, q := range []string{create, unlock} {
				if _, err := lockConn.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if err := <-done; err != nil {
				t.Errorf("runStep = %v, want nil: the index exists once its statement failed", err)
			}
			if !tg.indexExists(t, "t", "t_race_idx") {
				t.Error("no index t_race_idx")
			}
		})
	})
}
