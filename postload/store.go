// Package postload is the post-load phase: what runs once every shard of
// a plan is done — the sequence resets of every target table, then the
// secondary indexes and foreign keys setup recorded (faster to build once
// than to maintain row by row, and no load order to respect), then,
// between two databases of one engine, the source's functions, views and
// triggers (triggers after the data, so that they do not fire during the
// load). Store keeps its steps in the target; Phase runs them as one
// leased unit of work (hold.Work).
package postload

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
)

// Unit is the plan's post-load phase as a leased unit: its lease and
// fence watermark. Its index, -1, is no table's shard, so no table of the
// plan, whatever its name, shares them.
func Unit(plan string) fence.Shard {
	return fence.Shard{Plan: plan, Table: Name, Index: -1}
}

// Name is the phase's name in a run's report (its takeovers).
const Name = "_postload"

// The phase's states, in its own row (seq 0) of the steps' table; a step
// is pending or done.
const (
	Pending = "pending"
	Running = "running"
	Done    = "done"
	Halted  = "halted"
)

// SQL is what the store runs on the target (a target dialect).
type SQL interface {
	TableExists(table []string) (string, []any)
	PostLoadList() string
	PostLoadInsert() string
	PostLoadState() string
	PostLoadDone() string
	PostLoadResume() string
}

// Store is the plan's post-load steps in the target.
type Store struct {
	Plan string
	SQL  SQL
}

// Step is a recorded post-load step.
type Step struct {
	dialect.Step
	Seq    int
	Target string // the target table, as the plan names it; "" for a schema object
	State  string
}

// Steps are a plan's recorded steps in the order they run; the first,
// seq 0, is the phase's own row.
type Steps []Step

// State is the phase's state; "" when none is recorded.
func (s Steps) State() string {
	if len(s) == 0 {
		return ""
	}
	return s[0].State
}

// List reads the plan's recorded steps.
func (s Store) List(ctx context.Context, q dialect.Querier) (Steps, error) {
	rows, err := q.QueryContext(ctx, s.SQL.PostLoadList(), s.Plan)
	if err != nil {
		return nil, fmt.Errorf("post-load steps: %w", err)
	}
	defer rows.Close()
	var out Steps
	for rows.Next() {
		var st Step
		var args string
		if err := rows.Scan(&st.Seq, &st.Kind, &st.Target, &st.Name, &st.SQL, &st.Exists, &args, &st.State); err != nil {
			return nil, fmt.Errorf("post-load steps: %w", err)
		}
		if err := json.Unmarshal([]byte(args), &st.ExistsArgs); err != nil {
			return nil, fmt.Errorf("post-load step %d: %w", st.Seq, err)
		}
		st.Table = strings.SplitN(st.Target, ".", 2)
		out = append(out, st)
	}
	return out, rows.Err()
}

// Recorded is List on a target that may not have the steps' table yet
// (none recorded then).
func (s Store) Recorded(ctx context.Context, q dialect.Querier) (Steps, error) {
	var ok bool
	tq, args := s.SQL.TableExists([]string{dialect.PostLoadTable})
	if err := q.QueryRowContext(ctx, tq, args...).Scan(&ok); err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return s.List(ctx, q)
}

// Resume sets a halted phase back to pending; it returns 1 when it was
// halted.
func (s Store) Resume(ctx context.Context, db dialect.DB) (int64, error) {
	if steps, err := s.Recorded(ctx, db); err != nil || len(steps) == 0 {
		return 0, err
	}
	res, err := db.ExecContext(ctx, s.SQL.PostLoadResume(), s.Plan)
	if err != nil {
		return 0, fmt.Errorf("resume the post-load phase: %w", err)
	}
	return res.RowsAffected()
}

// SetState records the phase's state, and the token that set it.
func (s Store) SetState(ctx context.Context, db dialect.DB, state string, token int64) error {
	_, err := db.ExecContext(ctx, s.SQL.PostLoadState(), state, token, s.Plan)
	return err
}

// MarkDone records step seq done.
func (s Store) MarkDone(ctx context.Context, db dialect.DB, token int64, seq int) error {
	_, err := db.ExecContext(ctx, s.SQL.PostLoadDone(), token, s.Plan, seq)
	return err
}

// TableSteps are the steps setup prepared for one target table.
type TableSteps struct {
	Target string // as the plan names it
	Steps  []dialect.Step
}

// Record records the steps of tables and the schema objects' (objects,
// in their order) not recorded yet, after those that are (recorded, as
// List read them in the same transaction). A step is known by its table,
// kind and name: one recorded twice is stored once. A done phase that
// gains steps (a table new to a discovering plan) is pending again.
func (s Store) Record(ctx context.Context, db dialect.DB, tables []TableSteps, objects []dialect.Step, recorded Steps) error {
	if len(recorded) == 0 {
		if _, err := db.ExecContext(ctx, s.SQL.PostLoadInsert(), s.Plan, 0, dialect.PostLoadPhase, "", "", "", "", "[]"); err != nil {
			return fmt.Errorf("record the post-load phase: %w", err)
		}
	}
	have := map[string]bool{}
	seq, added := 0, 0
	for _, st := range recorded {
		have[st.Target+"\x00"+st.Kind+"\x00"+st.Name] = true
		seq = max(seq, st.Seq)
	}
	record := func(table string, st dialect.Step) error {
		if have[table+"\x00"+st.Kind+"\x00"+st.Name] {
			return nil
		}
		args, err := json.Marshal(st.ExistsArgs)
		if err != nil {
			return err
		}
		if st.ExistsArgs == nil {
			args = []byte("[]")
		}
		seq++
		if _, err := db.ExecContext(ctx, s.SQL.PostLoadInsert(), s.Plan, seq, st.Kind, table, st.Name, st.SQL, st.Exists, string(args)); err != nil {
			return fmt.Errorf("record post-load step %s %s of %s: %w", st.Kind, st.Name, table, err)
		}
		have[table+"\x00"+st.Kind+"\x00"+st.Name] = true
		added++
		return nil
	}
	for _, t := range tables {
		for _, st := range t.Steps {
			if err := record(t.Target, st); err != nil {
				return err
			}
		}
	}
	for _, st := range objects { // of the schema, not of one table
		if err := record("", st); err != nil {
			return err
		}
	}
	if added > 0 && recorded.State() == Done {
		if err := s.SetState(ctx, db, Pending, 0); err != nil {
			return fmt.Errorf("reopen the post-load phase: %w", err)
		}
	}
	return nil
}

// IsObject says whether a step creates a schema object (not an index, a
// foreign key or a sequence reset).
func IsObject(kind string) bool {
	switch kind {
	case dialect.StepFunction, dialect.StepProcedure, dialect.StepView, dialect.StepMaterializedView, dialect.StepTrigger:
		return true
	}
	return false
}
