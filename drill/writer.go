package drill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/keyset"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/schema"
)

// WriterStats is what the stream drills' writer committed at the source.
type WriterStats struct {
	Table        string `json:"table"`
	Transactions int64  `json:"transactions"`
	// Changes are the row changes committed: each statement changes one
	// row, so the change stream must apply exactly as many.
	Changes      int64  `json:"changes"`
	Inserts      int64  `json:"inserts"`
	Updates      int64  `json:"updates"`
	Deletes      int64  `json:"deletes"`
	MaxTxChanges int64  `json:"max_tx_changes"` // the most row changes of one transaction
	Failures     int64  `json:"failures"`       // transactions rolled back
	LastError    string `json:"last_error,omitempty"`
}

// writerPool: the rows the writer works on are every writerStride-th row of
// the table's first writerScan rows by key.
const (
	writerScan   = 10000
	writerStride = 5
	writerPage   = 500
)

// writer is the application of a stream drill: it changes one table of the
// plan at the source at a steady pace, one transaction at a time, by the
// table's key and with bound values — it deletes a row, inserts a row it
// deleted back, or swaps the other columns of two rows (two updates) — and
// counts what it committed. It writes only values the table held, so any
// column type will do. An operation the table refuses (a unique column, a
// foreign key, a generated column) is not tried again.
type writer struct {
	db      *sql.DB
	sql     dialect.Dialect
	table   []string
	cols    []string
	key     []string
	keyIdx  []int
	other   []int // the positions of the columns outside the key
	every   time.Duration
	log     *slog.Logger
	rng     *rand.Rand
	live    [][]any         // rows in the source, as the writer left them
	gone    [][]any         // rows the writer deleted, with their last values
	refused map[string]bool // kinds of change the table refused (writerRefusals in a row)
	fails   map[string]int

	mu    sync.Mutex
	stats WriterStats
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// writerRefusals is how many failures in a row of one kind of change
// make the writer give that kind up.
const writerRefusals = 3

// newWriter connects to the plan's source and reads the rows the writer
// will change, from the plan's first table. rate is transactions per second.
func newWriter(ctx context.Context, plan *plans.Plan, rate float64, log *slog.Logger) (*writer, error) {
	if len(plan.Tables) == 0 {
		return nil, errors.New("drill: the plan has no table for the writer")
	}
	t := plan.Tables[0]
	d, err := dialect.For(plan.Source.Engine())
	if err != nil {
		return nil, err
	}
	db, d, err := dialect.Open(ctx, d, plan.Source, dialect.Session{RawTimes: true})
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", plan.Source, err)
	}
	db.SetMaxOpenConns(1)
	w := &writer{db: db, sql: d, table: t.SourceIdent(), key: t.Key, every: time.Duration(float64(time.Second) / rate),
		log: log, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11)), refused: map[string]bool{}, fails: map[string]int{},
		quit: make(chan struct{}), done: make(chan struct{}), stats: WriterStats{Table: t.Name}}
	if err := w.load(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return w, nil
}

// load reads the table's columns and the rows to work on.
func (w *writer) load(ctx context.Context) error {
	all, err := schema.Columns(ctx, w.db, w.sql, w.table)
	if err != nil {
		return fmt.Errorf("drill: the writer's table %s: %w", w.stats.Table, err)
	}
	for _, c := range all {
		w.cols = append(w.cols, c.Name)
	}
	if w.keyIdx, err = keyset.KeyIndexes(w.cols, w.key); err != nil {
		return fmt.Errorf("drill: the writer's table %s: %w", w.stats.Table, err)
	}
	for i := range w.cols {
		if !slices.Contains(w.keyIdx, i) {
			w.other = append(w.other, i)
		}
	}
	rd := keyset.Reader{DB: w.db, SQL: dialect.WithColumns(w.sql, w.table, all), Table: w.table, Columns: w.cols, Key: w.key, Limit: writerPage}
	var after []any
	for n := 0; n < writerScan; n += writerPage {
		rows, err := rd.Page(ctx, after)
		if err != nil {
			return fmt.Errorf("drill: the writer reads %s: %w", w.stats.Table, err)
		}
		for i, r := range rows {
			if (n+i)%writerStride == 0 {
				w.live = append(w.live, slices.Clone(r))
			}
		}
		if len(rows) < writerPage {
			break
		}
		after = keyset.KeyOf(rows[len(rows)-1], w.keyIdx)
	}
	if len(w.live) < 2 {
		return fmt.Errorf("drill: the writer found %d rows in %s: a stream drill needs a table with rows", len(w.live), w.stats.Table)
	}
	return nil
}

// start writes until stop.
func (w *writer) start() {
	go func() {
		defer close(w.done)
		t := time.NewTicker(w.every)
		defer t.Stop()
		for {
			select {
			case <-w.quit:
				return
			case <-t.C:
			}
			w.step()
		}
	}()
}

// stop stops the writer, waits for its last transaction and returns what
// it committed.
func (w *writer) stop() WriterStats {
	w.once.Do(func() {
		close(w.quit)
		<-w.done
		_ = w.db.Close()
	})
	return w.Stats()
}

// Stats is what the writer has committed so far.
func (w *writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// stuck reports whether the table refused every kind of change.
func (w *writer) stuck() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refused["swap"] && w.refused["delete"] && w.refused["insert"]
}

// change is one statement of a transaction: the row it leaves (nil: deleted).
type change struct {
	q    string
	args []any
}

// step commits one transaction of one kind of change.
func (w *writer) step() {
	kind := w.pick()
	if kind == "" {
		return
	}
	var stmts []change
	var apply func()
	switch kind {
	case "delete":
		i := w.rng.IntN(len(w.live))
		row := w.live[i]
		stmts = []change{{w.sql.DeleteByKeys(w.table, w.key, 1), keyset.KeyOf(row, w.keyIdx)}}
		apply = func() { w.live = slices.Delete(w.live, i, i+1); w.gone = append(w.gone, row) }
	case "insert":
		i := w.rng.IntN(len(w.gone))
		row := w.gone[i]
		stmts = []change{{w.sql.DrillInsert(w.table, w.cols), row}}
		apply = func() { w.gone = slices.Delete(w.gone, i, i+1); w.live = append(w.live, row) }
	case "swap":
		i, j, ok := w.pair()
		if !ok {
			return
		}
		a, b := w.live[i], w.live[j]
		na, nb := w.swapped(a, b), w.swapped(b, a)
		cols := make([]string, len(w.other))
		for k, c := range w.other {
			cols[k] = w.cols[c]
		}
		q := w.sql.DrillUpdate(w.table, cols, w.key)
		stmts = []change{{q, w.updateArgs(na)}, {q, w.updateArgs(nb)}}
		apply = func() { w.live[i], w.live[j] = na, nb }
	}
	err := w.commit(stmts)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.stats.Failures++
		w.stats.LastError = err.Error()
		if w.fails[kind]++; w.fails[kind] >= writerRefusals {
			w.refused[kind] = true
			w.log.Warn("the writer's change was refused; it changes the table otherwise from now on", "change", kind, "err", err)
		}
		return
	}
	w.fails[kind] = 0
	apply()
	n := int64(len(stmts))
	w.stats.Transactions++
	w.stats.Changes += n
	w.stats.MaxTxChanges = max(w.stats.MaxTxChanges, n)
	switch kind {
	case "delete":
		w.stats.Deletes++
	case "insert":
		w.stats.Inserts++
	default:
		w.stats.Updates += n
	}
}

// pick chooses the next kind of change: half of them swaps, the rest
// deletes and inserts, with at most a fifth of the rows deleted at once.
func (w *writer) pick() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var kinds []string
	if !w.refused["swap"] && len(w.other) > 0 && len(w.live) >= 2 {
		kinds = append(kinds, "swap", "swap")
	}
	if !w.refused["delete"] && len(w.live) > 2 && len(w.gone) < (len(w.live)+len(w.gone))/5 {
		kinds = append(kinds, "delete")
	}
	if !w.refused["insert"] && len(w.gone) > 0 {
		kinds = append(kinds, "insert")
	}
	if len(kinds) == 0 {
		return ""
	}
	return kinds[w.rng.IntN(len(kinds))]
}

// pair picks two live rows whose other columns differ (a swap of equal
// values would change nothing: MySQL logs no change for it).
func (w *writer) pair() (int, int, bool) {
	for range 10 {
		i, j := w.rng.IntN(len(w.live)), w.rng.IntN(len(w.live))
		if i != j && !reflect.DeepEqual(w.swapped(w.live[i], w.live[j]), w.live[i]) {
			return i, j, true
		}
	}
	return 0, 0, false
}

// swapped is row a with the other columns of b.
func (w *writer) swapped(a, b []any) []any {
	out := slices.Clone(a)
	for _, c := range w.other {
		out[c] = b[c]
	}
	return out
}

// updateArgs are DrillUpdate's values for row: its other columns, then its key.
func (w *writer) updateArgs(row []any) []any {
	args := make([]any, 0, len(row))
	for _, c := range w.other {
		args = append(args, row[c])
	}
	return append(args, keyset.KeyOf(row, w.keyIdx)...)
}

// commit runs stmts in one transaction; each must change exactly one row.
func (w *writer) commit(stmts []change) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, s := range stmts {
		res, err := tx.ExecContext(ctx, s.q, s.args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n != 1 {
			return fmt.Errorf("drill: the writer's statement changed %d rows, want 1 (another writer changes the table?)", n)
		}
	}
	return tx.Commit()
}
