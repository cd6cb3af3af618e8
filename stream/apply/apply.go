package apply

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/stream"
)

// SQL is what the applier needs from the target dialect.
type SQL interface {
	fence.Bounder
	StateSQL
	StreamAdvance() string
	StreamBump() string
	StreamUpsert(table []string, cols, key []string, fence string, rows int) string
	StreamUpdate(table []string, cols, key []string, fence string) string
	DeleteByKeys(table []string, key []string, n int) string
	MaxParams() int
	StreamAsyncCommit() string
}

// Fencer checks the applier's watermark at the start of every transaction.
type Fencer interface {
	CheckLease(ctx context.Context, tx fence.Tx, s fence.Shard, l fence.Lease) error
}

// Applied is what is reported of each committed target transaction.
type Applied struct {
	Pos     stream.Pos
	Txs     int // source transactions
	Changes int // row changes of the plan's tables
	Commit  time.Time
	Took    time.Duration
	Lag     stream.Lag // the capture's, after the transaction
}

// Applier applies a plan's change stream into the target.
type Applier struct {
	Target      *sql.DB
	SQL         SQL
	Fence       Fencer
	Unit        fence.Shard // Unit(plan)
	FenceColumn string
	Tables      []*Table
	// MaxChanges is the row changes of one target transaction to begin
	// with (a source transaction larger than that is still applied
	// whole); groups grow to up to maxGroupFactor times that while
	// they take less than groupTarget (pace). MaxWait is how long a
	// transaction waits for more source transactions to group.
	MaxChanges int
	MaxWait    time.Duration
	// DurableEvery is how often a target transaction that applies changes
	// waits for its commit to reach the disk, where the target lets the
	// others commit without waiting (SQL.StreamAsyncCommit; 0: every one
	// waits); a transaction without changes always waits. The source is
	// acknowledged only the positions of such durable commits, each of
	// which makes the commits before it durable: a crash of the target
	// loses a suffix of commits and their position with them, and the
	// source sends those transactions again.
	DurableEvery time.Duration
	// MaxRetries and MaxOutage bound the attempts at one group (retryKind).
	MaxRetries int
	MaxOutage  time.Duration
	Log        *slog.Logger
	OnApply    func(Applied) // may be nil

	stmts map[stmtKey]string // the upserts' and deletes' texts, by table, kind and rows
	limit atomic.Int64       // the changes a group gathers now (pace)
}

// stmtKey names a statement text of run.
type stmtKey struct {
	t    *Table
	kind kind
	rows int
}

// stmt is the text of an upsert or a delete of rows rows of t, made once.
func (a *Applier) stmt(t *Table, k kind, rows int) string {
	key := stmtKey{t, k, rows}
	if q, ok := a.stmts[key]; ok {
		return q
	}
	if a.stmts == nil {
		a.stmts = map[stmtKey]string{}
	}
	var q string
	if k == upsert {
		q = a.SQL.StreamUpsert(t.Target, t.Columns, t.Key, a.FenceColumn, rows)
	} else {
		q = a.SQL.DeleteByKeys(t.Target, t.Key, rows)
	}
	a.stmts[key] = q
	return q
}

// ErrStopped is the stream found stopping or stopped (a cutover): the
// applier is done.
var ErrStopped = errors.New("the stream was stopped")

// IdleCheck is how often an idle applier looks whether it was stopped.
const IdleCheck = time.Second

// Run applies rd's transactions, from the position the claim read, until
// the stream is stopped (ErrStopped), ctx or the lease ends, or a failure.
// Three goroutines make a pipeline: one reads the stream, one groups what
// was read and plans the group's statements, and this one applies the
// groups in turn, while the next group is read and planned.
func (a *Applier) Run(ctx context.Context, lease fence.Lease, rd stream.Reader) error {
	lctx := lease.Context()
	a.limit.Store(int64(max(a.MaxChanges, 1)))
	// The planner's tables, and copies for this goroutine's plans in source
	// order (a Table caches the column order of the changes it plans).
	tables, exactTables := map[[2]string]*Table{}, map[[2]string]*Table{}
	for _, t := range a.Tables {
		tables[[2]string{t.Schema, t.Name}] = t
		cp := *t
		exactTables[[2]string{t.Schema, t.Name}] = &cp
	}
	// In memory at most: 256 source transactions read ahead, the group the
	// planner gathers or holds (plans is unbuffered), the group applied.
	txs := make(chan stream.Tx, 256)
	plans := make(chan planned)
	errc := make(chan error, 1)
	rctx, cancel := context.WithCancel(lctx)
	defer cancel()
	go func() {
		for {
			tx, err := rd.Next(rctx)
			if err != nil {
				errc <- err
				return
			}
			select {
			case txs <- tx:
			case <-rctx.Done():
				return
			}
		}
	}()
	go func() {
		for {
			var group []stream.Tx
			select {
			case tx := <-txs:
				group = a.gather(tx, txs)
			case <-rctx.Done():
				return
			}
			p, err := planOf(tables, group, false)
			select {
			case plans <- planned{group, p, err}:
			case <-rctx.Done():
				return
			}
		}
	}()
	sess := fence.NewSession(a.Target, a.SQL)
	defer sess.Close()
	idle := time.NewTimer(IdleCheck)
	defer idle.Stop()
	var durableAt time.Time // the last durable commit
	var unacked stream.Pos  // the position of the commits since, not acknowledged
	for {
		var next planned
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-lctx.Done():
			return fmt.Errorf("%s: %w", a.Unit, context.Cause(lctx))
		case err := <-errc:
			return fmt.Errorf("read the change stream: %w", err)
		case next = <-plans:
			if next.err != nil {
				return next.err
			}
		case <-idle.C:
			next.plan = newPlan(tables, false)
		}
		idle.Reset(IdleCheck)
		group := next.group
		lag := rd.Behind()
		// Durable: every DurableEvery, and a group without changes (the
		// source's other tables, an idle stream's keepalive: no change is
		// waiting for it, and it makes the commits before it durable).
		c := commit{durable: a.SQL.StreamAsyncCommit() == "" || time.Since(durableAt) >= a.DurableEvery || next.plan.n == 0}
		if len(group) == 0 {
			c.flush = unacked // idle: the commits not acknowledged are made durable
		}
		var res Applied
		budget := retry.Budget{MaxFailures: a.MaxRetries, MaxOutage: a.MaxOutage}
		err := retry.Do(lctx, &budget, func() (err error) {
			res, err = a.apply(lease, sess, next.plan, group, lag, c)
			if errors.Is(err, errOps) {
				a.Log.Warn("the target refused the changes applied by key; applying them again in source order", "err", err)
				var p *plan
				if p, err = planOf(exactTables, group, true); err == nil {
					res, err = a.apply(lease, sess, p, group, lag, c)
				}
			}
			return err
		}, a.retryKind(lctx), func(err error, k retry.Kind, attempt int, wait time.Duration) {
			a.limit.Store(int64(max(a.MaxChanges, 1))) // the next groups small again
			a.Log.Warn("the stream's transaction failed; applying it again", "attempt", attempt, "backoff", wait, "err", err)
		})
		if err != nil {
			if lctx.Err() != nil && ctx.Err() == nil {
				return fmt.Errorf("%s: %w", a.Unit, context.Cause(lctx))
			}
			return err
		}
		if len(group) > 0 {
			a.pace(res)
		}
		switch {
		case res.Pos == "":
		case c.durable:
			rd.Ack(res.Pos)
			durableAt, unacked = time.Now(), ""
		default:
			unacked = res.Pos
		}
		if a.OnApply != nil && len(group) > 0 {
			a.OnApply(res)
		}
	}
}

// planned is a group of source transactions and its plan.
type planned struct {
	group []stream.Tx
	plan  *plan
	err   error
}

// planOf plans the changes of group.
func planOf(tables map[[2]string]*Table, group []stream.Tx, exact bool) (*plan, error) {
	p := newPlan(tables, exact)
	for _, tx := range group {
		for _, c := range tx.Changes {
			if err := p.add(c); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// gather groups first with the transactions already read, up to the
// group's size (pace) in row changes or MaxWait.
func (a *Applier) gather(first stream.Tx, txs <-chan stream.Tx) []stream.Tx {
	group, n := []stream.Tx{first}, len(first.Changes)
	wait := time.NewTimer(a.MaxWait)
	defer wait.Stop()
	for limit := int(a.limit.Load()); n < limit; {
		select {
		case tx := <-txs:
			group = append(group, tx)
			n += len(tx.Changes)
			continue
		default:
		}
		select {
		case tx := <-txs:
			group = append(group, tx)
			n += len(tx.Changes)
		case <-wait.C:
			return group
		}
	}
	return group
}

// errOps marks a failure of the statements that write the changes (not
// of the fence, the state or the position): the group is applied again in
// source order.
var errOps = errors.New("apply the changes")

// commit is how a target transaction commits.
type commit struct {
	durable bool       // waiting for its log to reach the disk (else StreamAsyncCommit)
	flush   stream.Pos // with an empty group: the position committed last, committed again, durable
}

// apply writes a group of source transactions in one target transaction:
// the fence check, the stream's state (stopping ends the applier), each
// written table's count, the changes (as p plans them: by key, or in source
// order), the position. An empty group only looks at the state, or with
// c.flush writes that position again, durably.
func (a *Applier) apply(lease fence.Lease, sess *fence.Session, p *plan, group []stream.Tx, lag stream.Lag, c commit) (res Applied, err error) {
	start := time.Now()
	conn, tx, tctx, end, err := sess.Begin(lease)
	if err != nil {
		return res, fmt.Errorf("begin the stream's transaction: %w", err)
	}
	defer func() {
		end() // the rollback first: the connection is not given up while its transaction is open
		if err != nil {
			sess.Discard()
		}
	}()
	if err := a.Fence.CheckLease(tctx, tx, a.Unit, lease); err != nil {
		return res, err
	}
	st, err := Read(tctx, tx, a.SQL, a.Unit.Plan, true)
	if err != nil {
		return res, err
	}
	if st.State != Following {
		if err := SetState(tctx, tx, a.SQL, a.Unit.Plan, Stopped); err != nil {
			return res, err
		}
		if err := tx.Commit(); err != nil {
			return res, fmt.Errorf("commit the stream's stop: %w", err)
		}
		return res, ErrStopped
	}
	lagMs := int64(lag.Seconds * 1000)
	if len(group) == 0 {
		if c.flush == "" {
			return res, tx.Rollback()
		}
		if _, err := tx.ExecContext(tctx, a.SQL.StreamAdvance(), string(c.flush), 0, 0, nil, lagMs, lag.Bytes, a.Unit.Plan); err != nil {
			return res, fmt.Errorf("commit the stream's position %s again: %w", c.flush, err)
		}
		if err := tx.Commit(); err != nil {
			return res, fmt.Errorf("commit the stream's position %s again: %w", c.flush, err)
		}
		return Applied{Pos: c.flush, Lag: lag}, nil
	}
	units := make([]string, 0, len(p.touch))
	for u := range p.touch {
		units = append(units, u)
	}
	slices.Sort(units) // one lock order for every applier and copy batch
	var bumps []statement
	if !c.durable {
		bumps = append(bumps, statement{sql: a.SQL.StreamAsyncCommit(), what: "commit without waiting for the disk"})
	}
	for _, u := range units {
		bumps = append(bumps, statement{sql: a.SQL.StreamBump(), args: []any{a.Unit.Plan, u}, what: "count the stream's write of " + u})
	}
	last := group[len(group)-1]
	advance := statement{sql: a.SQL.StreamAdvance(), args: []any{string(last.End), len(group), p.n, nullTime(last.Commit), lagMs, lag.Bytes, a.Unit.Plan},
		what: "advance the stream to " + string(last.End)}
	if err := a.runOps(tctx, conn, tx, p, bumps, advance); err != nil {
		var se *stmtError
		if p.exact || tctx.Err() != nil || !errors.As(err, &se) || !se.op {
			return res, err
		}
		return res, fmt.Errorf("%w: %w", errOps, err)
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("commit the stream up to %s: %w", last.End, err)
	}
	return Applied{Pos: last.End, Txs: len(group), Changes: p.n, Commit: last.Commit, Took: time.Since(start), Lag: lag}, nil
}

// runOps runs, in order, the counts (bumps), the plan's ops and the
// position (advance): the statements between two partial updates together
// (exec), each partial update alone (what it does next depends on its
// result). A failure of an op is a *stmtError whose op is true.
func (a *Applier) runOps(ctx context.Context, conn *sql.Conn, tx *sql.Tx, p *plan, bumps []statement, advance statement) error {
	pending := bumps
	for _, o := range p.ops {
		if o.kind != partial {
			pending = append(pending, a.statements(o)...)
			continue
		}
		if err := a.exec(ctx, conn, tx, pending); err != nil {
			return err
		}
		pending = nil
		if err := a.partialUpdate(ctx, tx, o); err != nil {
			return &stmtError{op: true, err: err}
		}
	}
	return a.exec(ctx, conn, tx, append(pending, advance))
}

// partialUpdate applies an update that kept some of the row's values.
func (a *Applier) partialUpdate(ctx context.Context, tx *sql.Tx, o *op) error {
	t := o.t
	res, err := tx.ExecContext(ctx, a.SQL.StreamUpdate(t.Target, o.cols, t.Key, a.FenceColumn), append(slices.Clone(o.vals), o.key...)...)
	if err != nil {
		return fmt.Errorf("apply an update to %s: %w", t.Unit, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	// The target does not hold the row yet, so it has no value to keep
	// for what the change did not carry: the source's row now is newer
	// than the change, and the stream brings any later one.
	return a.fetch(ctx, tx, t, o.key)
}

// fetch upserts the source's row of key as it is now (none if it is gone).
func (a *Applier) fetch(ctx context.Context, tx *sql.Tx, t *Table, key []any) error {
	if t.Source == nil {
		return fmt.Errorf("apply: %s: an update without every value, of a row the target does not hold, and no source to read it from", t.Unit)
	}
	rows, err := t.Source.ByKeys(ctx, [][]any{key})
	if err != nil {
		return fmt.Errorf("read %s %v from the source: %w", t.Unit, key, err)
	}
	if len(rows) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, a.SQL.StreamUpsert(t.Target, t.Columns, t.Key, a.FenceColumn, 1), rows[0]...); err != nil {
		return fmt.Errorf("apply a fetched row to %s: %w", t.Unit, err)
	}
	return nil
}

// maxChunk bounds the rows of one statement; a last statement of fewer
// than smallChunk rows takes them all.
const (
	maxChunk   = 1024
	smallChunk = 64
)

// chunks cuts rows into statements of a power of two rows each, the
// largest that fits (at most maxChunk and at most per), and a last one of
// the fewer than smallChunk rows left: however many rows each group holds,
// a few statement texts, which pgx prepares once per connection (its
// statement cache), instead of a new text of thousands of parameters to
// parse and plan for every group (measured: half the server's CPU of an
// upsert of 700 rows).
func chunks(rows [][]any, per int) iter.Seq[[][]any] {
	limit := 1
	for limit*2 <= min(per, maxChunk) {
		limit *= 2
	}
	small := min(smallChunk, limit)
	return func(yield func([][]any) bool) {
		for len(rows) > 0 {
			n := len(rows)
			if n >= small {
				n = limit
				for n > len(rows) {
					n /= 2
				}
			}
			if !yield(rows[:n]) {
				return
			}
			rows = rows[n:]
		}
	}
}

func flat(rows [][]any) []any {
	var out []any
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}
