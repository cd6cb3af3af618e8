package postload

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/schema"
)

// PhaseSQL is what the phase runs on the target (a target dialect).
type PhaseSQL interface {
	SQL
	schema.LockSQL
	ReadTable(ctx context.Context, db dialect.Querier, table []string) (*dialect.TableDef, error)
	SequenceSteps(def *dialect.TableDef) []dialect.Step
}

// Report is what the post-load phase did in this run.
type Report struct {
	Sequences int   `json:"sequences"` // counters reset
	Steps     int   `json:"steps"`     // indexes and foreign keys created by this instance
	Objects   int   `json:"objects"`   // views, materialized views, routines and triggers created by this instance
	ByOther   bool  `json:"by_other"`  // done by another instance (or an earlier run)
	ElapsedMs int64 `json:"elapsed_ms"`
}

// Phase is the post-load phase of one plan as a hold.Work. One instance
// runs it; the others wait as its standbys and take it over when the
// holder dies. Each step runs again harmlessly after a crash
// (dialect.Step), and is marked done under the fence; a step an old
// holder runs after a takeover is the same statement the new holder runs.
type Phase struct {
	Plan   *plans.Plan
	Store  Store
	SQL    PhaseSQL
	Target *sql.DB // the lease sessions' pool
	// Scan is the target pool without statement timeouts, where the
	// steps run (an index build outlasts any lease-bound statement).
	Scan  func(context.Context) (*sql.DB, error)
	Fence hold.Fence
	// SetupLock names the plan's setup lock: setup reads the phase's
	// state and drops the foreign keys of the load under it, and must not
	// find the phase pending while a holder starts re-creating them.
	SetupLock string
	// Sources are the source tables' definitions as setup read them, in
	// the plan's order (nil where unknown): the counters come from them.
	Sources []*dialect.TableDef
	Log     *slog.Logger
	// OnTakeover, when not nil, is told of a claim that took the phase
	// over from a holder that did not finish it.
	OnTakeover func(*hold.Claim)
	// Announce, when not nil, records the phase's end in the transaction
	// that records it: done, or halted by cause (the run's outbox).
	Announce func(ctx context.Context, tx *sql.Tx, done bool, token int64, cause error) error
	Report   Report
}

var _ hold.Guarded = (*Phase)(nil)

// Look reads the phase's state: none recorded (a plan set up by a version
// without the phase) is done.
func (p *Phase) Look(ctx context.Context) (hold.Found, error) {
	steps, err := p.Store.Recorded(ctx, p.Target)
	if err != nil || len(steps) == 0 {
		return hold.Found{State: cursor.Done}, err
	}
	return hold.Found{State: cursor.State(steps.State())}, nil
}

// Halted is the error of a phase found halted.
func (p *Phase) Halted() error {
	return fmt.Errorf("%w: the post-load phase of plan %s is halted; fix the cause, then run `migrate resume`", hold.ErrHalted, p.Plan.Name)
}

// Guard runs the claim under the plan's setup lock, on a connection of
// its own.
func (p *Phase) Guard(lease hold.Lease, claim func() error) error {
	return p.underSetupLock(lease, claim)
}

// Resume reads the phase's state as the claim finds it (after the
// watermark's lock, so after any previous holder's last commit) and,
// unless it is done or halted, records it running.
func (p *Phase) Resume(ctx context.Context, tx *sql.Tx, lease hold.Lease) (hold.Found, error) {
	steps, err := p.Store.List(ctx, tx)
	if err != nil {
		return hold.Found{}, err
	}
	found := hold.Found{State: cursor.State(steps.State())}
	if found.State == cursor.Done || found.State == cursor.Halted {
		return found, nil
	}
	return found, p.Store.SetState(ctx, tx, Running, lease.Token())
}

func (p *Phase) underSetupLock(lease hold.Lease, fn func() error) (err error) {
	conn, err := p.Target.Conn(lease.Context())
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer conn.Close()
	unlock, err := schema.Lock(lease.Context(), conn, p.SQL, p.SetupLock)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unlock(); uerr != nil && err == nil {
			err = uerr
		}
	}()
	return fn()
}

// Run runs every step not done yet under c's lease, then records the
// phase done.
func (p *Phase) Run(ctx context.Context, c *hold.Claim) error {
	start := time.Now()
	p.Report.ByOther = false
	defer func() { p.Report.ElapsedMs = time.Since(start).Milliseconds() }()
	log := p.log().With("shard", c.Unit.String())
	if c.TakenOver() {
		log.Warn("took over the post-load phase", "previous_owner", c.Previous.Owner, "previous_token", c.Previous.Token, "token", c.Lease.Token(), "wait", c.Wait)
		if p.OnTakeover != nil {
			p.OnTakeover(c)
		}
	}
	scan, err := p.Scan(ctx)
	if err != nil {
		return err
	}
	lctx := c.Lease.Context()
	for i, t := range p.Plan.Tables {
		def, err := p.SQL.ReadTable(lctx, scan, t.TargetIdent())
		if err != nil {
			return fmt.Errorf("target table %s: %w", t.Target, err)
		}
		if i < len(p.Sources) && p.Sources[i] != nil {
			SourceCounters(def, p.Sources[i])
		}
		for _, st := range p.SQL.SequenceSteps(def) {
			if err := runStep(lctx, scan, st); err != nil {
				return p.halt(c, log, t.Target, st, err)
			}
			p.Report.Sequences++
		}
	}
	steps, err := p.Store.List(lctx, p.Target)
	if err != nil {
		return err
	}
	for _, st := range steps {
		if st.Seq == 0 || st.State == Done {
			continue
		}
		began := time.Now()
		if err := runStep(lctx, scan, st.Step); err != nil {
			return p.halt(c, log, st.Target, st.Step, err)
		}
		err := p.Fence.Do(c.Lease, c.Unit, func(ctx context.Context, tx *sql.Tx) error {
			return p.Store.MarkDone(ctx, tx, c.Lease.Token(), st.Seq)
		})
		if err != nil {
			return err
		}
		if IsObject(st.Kind) {
			p.Report.Objects++
		} else {
			p.Report.Steps++
		}
		log.Info("post-load step done", "table", st.Target, "kind", st.Kind, "name", st.Name, "elapsed", time.Since(began))
	}
	return p.finish(c, log)
}

func (p *Phase) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

// finish records the phase done, or pending again when another
// instance's setup recorded steps while it ran (a table new to a
// discovering plan): those steps wait for the run that copies their
// tables, which runs the phase again once its shards are done. Under the
// setup lock, so that no setup records a step between the look and the
// mark.
func (p *Phase) finish(c *hold.Claim, log *slog.Logger) error {
	return p.underSetupLock(c.Lease, func() error {
		return p.Fence.Do(c.Lease, c.Unit, func(ctx context.Context, tx *sql.Tx) error {
			steps, err := p.Store.List(ctx, tx)
			if err != nil {
				return err
			}
			state, added := Done, 0
			for _, st := range steps {
				if st.Seq > 0 && st.State != Done {
					state = Pending
					added++
				}
			}
			if added > 0 {
				log.Info("another instance's setup recorded post-load steps while this phase ran; the phase is pending again, for the run that copies their tables", "steps", added)
			}
			if err := p.Store.SetState(ctx, tx, state, c.Lease.Token()); err != nil || state != Done {
				return err
			}
			return p.announce(ctx, tx, true, c.Lease.Token(), nil)
		})
	})
}

// halt halts the phase on a step the target refused for good (a foreign
// key the data violates, a unique index over duplicates): running it
// again would fail again. An unavailable target or a lost lease is
// returned as is, for the loop to wait out or be fenced.
func (p *Phase) halt(c *hold.Claim, log *slog.Logger, table string, st dialect.Step, err error) error {
	if c.Lease.Context().Err() != nil || dialect.Classify(err) == dialect.Unavailable {
		return err
	}
	log.Error("a post-load step failed: the post-load phase is halted; fix the cause, then run `migrate resume`", "table", table, "kind", st.Kind, "name", st.Name, "err", err)
	if table == "" { // a schema object
		err = fmt.Errorf("%w: post-load %s %s: %w", hold.ErrHalted, st.Kind, st.Name, err)
	} else {
		err = fmt.Errorf("%w: post-load %s %s of %s: %w", hold.ErrHalted, st.Kind, st.Name, table, err)
	}
	herr := p.Fence.Do(c.Lease, c.Unit, func(ctx context.Context, tx *sql.Tx) error {
		if err := p.Store.SetState(ctx, tx, Halted, c.Lease.Token()); err != nil {
			return err
		}
		return p.announce(ctx, tx, false, c.Lease.Token(), err)
	})
	if herr != nil {
		log.Error("could not record the post-load phase halted", "err", herr)
	}
	return err
}

// announce is Announce when there is one.
func (p *Phase) announce(ctx context.Context, tx *sql.Tx, done bool, token int64, cause error) error {
	if p.Announce == nil {
		return nil
	}
	return p.Announce(ctx, tx, done, token, cause)
}

// SourceCounters raises the Next of def's identity columns (the target
// table's) to that of the source's column of the same name: the counter
// the application's next insert would have used in the source, which a
// table whose last rows were deleted keeps above its highest key.
func SourceCounters(def, src *dialect.TableDef) {
	for i, c := range def.Columns {
		j := slices.IndexFunc(src.Columns, func(s dialect.ColumnDef) bool { return s.Name == c.Name && s.Identity != "" })
		if c.Identity != "" && j >= 0 {
			def.Columns[i].Next = max(c.Next, src.Columns[j].Next)
		}
	}
}

// runStep runs one step unless its object exists: a step that fails is
// done all the same when its object exists afterwards (another holder
// created it meanwhile).
func runStep(ctx context.Context, db *sql.DB, st dialect.Step) error {
	exists := func() (bool, error) {
		if st.Exists == "" {
			return false, nil
		}
		var ok bool
		err := db.QueryRowContext(ctx, st.Exists, st.ExistsArgs...).Scan(&ok)
		return ok, err
	}
	if ok, err := exists(); err != nil || ok {
		return err
	}
	q := st.SQL
	if st.Value != "" {
		var n int64
		if err := db.QueryRowContext(ctx, st.Value, st.ValueArgs...).Scan(&n); err != nil {
			return schema.StmtError("post-load "+st.Kind+" "+st.Name, st.Value, err)
		}
		q = strings.ReplaceAll(q, "{{n}}", strconv.FormatInt(n, 10))
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		if ok, eerr := exists(); eerr == nil && ok {
			return nil
		}
		return schema.StmtError("post-load "+st.Kind+" "+st.Name, q, err)
	}
	return nil
}

var _ hold.Work = (*Phase)(nil)
