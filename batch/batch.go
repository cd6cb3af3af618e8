// Package batch is the copy loop of one shard (SPEC §5 C1, C3, F1, F2):
// keyset reads from the source, and per batch one target transaction that
// checks the fence, upserts the rows idempotently with the writer's token in
// the fence column, and advances the cursor. A crash loses at most the one
// uncommitted batch; the next page is read while the current one is written.
package batch

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/retry"
)

// ErrHalted means automatic recovery gave up on the shard — max_retries
// consecutive failures, a value that cannot cross to the target, rows owned
// by another writer — and an operator must look at it.
var ErrHalted = errors.New("batch: shard halted")

// ErrLeaseLost means the lease could no longer be trusted, so writing stopped.
var ErrLeaseLost = errors.New("batch: lease lost")

// SourceSQL is what the copier needs from the source dialect.
type SourceSQL interface {
	SelectPage(table []string, cols, key []string, after bool, r dialect.Range, limit int) dialect.Query
	SelectLast(table []string, cols, key []string, r dialect.Range, limit int) dialect.Query
	SelectByKeys(table []string, cols, key []string, n int) string
}

// Convert turns one value read from the source into the value written to
// the target column; it is nil when no column needs converting.
type Convert func(col int, v any) (any, error)

// TargetSQL is what the copier needs from the target dialect.
type TargetSQL interface {
	Bounder
	Upsert(table []string, cols, key []string, fence string, rows int) dialect.Upsert
	DeleteByKeys(table []string, key []string, n int) string
	MaxParams() int
}

// Bounder bounds a transaction on the server.
type Bounder interface {
	BoundTx(remaining time.Duration) (string, []any)
	UnboundTx() string
}

// Fencer checks the watermark at the start of every batch transaction.
type Fencer interface {
	Check(ctx context.Context, tx fence.Tx, s fence.Shard, t fence.Token, owner string) error
}

// Cursor advances the checkpoint inside the batch transaction.
type Cursor interface {
	Advance(ctx context.Context, q cursor.Querier, s fence.Shard, lastKey []any, prevDone, rowsDone int64, t fence.Token) error
}

// Lease is the writer's right to the shard: its context ends when the lease
// can no longer be trusted, and its deadline bounds every transaction.
type Lease interface {
	Context() context.Context
	Deadline() time.Time
}

// Spec is one shard's copy job.
type Spec struct {
	Shard       fence.Shard
	Source      []string // source table identifier
	Target      []string // target table identifier
	Columns     []string // copied columns; includes every key column
	Key         []string // business key, in order
	FenceColumn string
	Range       dialect.Range
	BatchSize   int
	MaxRetries  int
	// MaxOutage is how long a database may stay unreachable (refused or
	// reset connections, shutting down, starting up) before the shard
	// halts; such failures do not count against MaxRetries. 0: MaxRetries
	// counts them too.
	MaxOutage time.Duration
	Convert   Convert // nil: values go to the target as read
	// Types are the target's columns in Columns' order; with them a target
	// dialect that is a dialect.BulkInserter writes new rows in bulk.
	Types []dialect.Column
}

// Progress is reported after each committed batch.
type Progress struct {
	Rows, Inserted, Updated int64
	LastKey                 []any
	Elapsed                 time.Duration
}

// Result sums a Copy.
type Result struct {
	Rows     int64 // rows written (inserted + updated + skipped)
	Inserted int64
	Updated  int64 // rows that existed in the target with an older or equal token: replayed
	Skipped  int64 // rows whose stored token was newer (never expected while the fence holds)
	Batches  int
	LastKey  []any
}

// Copier copies shards from a source pool to a target pool.
type Copier struct {
	Source    *sql.DB
	SourceSQL SourceSQL
	Target    *sql.DB
	TargetSQL TargetSQL
	Fence     Fencer
	Cursor    Cursor
	Log       *slog.Logger
	OnBatch   func(fence.Shard, Progress) // may be nil
	// AfterFirst, if set, is called with the rows of the first batch once it
	// has committed, before the copy goes on (a takeover checks them).
	AfterFirst func(rows [][]any)
	// OnFailure, if set, is called for each failed attempt at reading a
	// page or writing a batch that is not final (retried or halting).
	OnFailure func(fence.Shard, error)
	// SchemaCheck, if set, compares the source table with what the copy
	// was set up for; the reader calls it every SchemaEvery, after a failed
	// read and at the end of the range. An error halts the shard (the source changed under the
	// copy: a column added, dropped or retyped).
	SchemaCheck func(context.Context) error

	upserts sync.Map // upsertSQL's statements
}

// SchemaEvery is how often the reader checks the source's schema.
const SchemaEvery = 5 * time.Second

type page struct {
	rows [][]any
	bulk []byte // the rows encoded for the bulk path, or nil
	err  error
}

// Copy copies the shard from the checkpoint from (its LastKey, nil for the
// start of the range, and its RowsDone) to the end of its range, writing
// under lease with token. It returns ErrLeaseLost or a fence.ErrStale error
// when it must stop writing, ErrHalted after MaxRetries consecutive failures
// or when the target holds rows written with a newer token.
func (c *Copier) Copy(ctx context.Context, spec Spec, lease Lease, t fence.Token, owner string, from cursor.Checkpoint) (Result, error) {
	after, done := from.LastKey, from.RowsDone
	var res Result
	keyIdx, err := keyIndexes(spec)
	if err != nil {
		return res, err
	}
	lctx := lease.Context()
	rctx, cancel := context.WithCancel(lctx)
	defer cancel()
	// Rows beyond the cursor are new unless the target held rows before the
	// run: those batches are written by bulk insert until one conflicts or
	// cannot be encoded, then by the fenced upsert. The reader encodes each
	// page while the previous one is written.
	var bulk atomic.Bool
	bi, ok := c.TargetSQL.(dialect.BulkInserter)
	bulk.Store(ok && len(spec.Types) == len(spec.Columns))
	encode := func(rows [][]any) []byte {
		if !bulk.Load() || len(rows) == 0 {
			return nil
		}
		var buf bytes.Buffer
		if err := bi.Encode(&buf, spec.Types, int64(t), rows); err != nil {
			c.upsertFromHere(spec, &bulk, err)
			return nil
		}
		return buf.Bytes()
	}
	pages := make(chan page, 1) // prefetch one page while the current one is written
	go c.read(rctx, spec, keyIdx, after, encode, pages)

	var p pace
	for {
		var pg page
		select {
		case pg = <-pages:
		case <-ctx.Done():
			return res, ctx.Err()
		case <-lctx.Done():
			return res, lost(ctx, lctx)
		}
		if pg.err != nil {
			if lctx.Err() != nil {
				return res, lost(ctx, lctx)
			}
			return res, pg.err
		}
		if len(pg.rows) == 0 {
			return res, nil
		}
		// A page is one batch unless the lease's runway cannot carry it:
		// then it is written in pieces, each a batch with its own cursor.
		for rest := pg; len(rest.rows) > 0; {
			start := time.Now()
			w, err := c.writeRetrying(ctx, spec, lease, t, owner, keyIdx, rest, encode, done, &p, &bulk)
			if err != nil {
				return res, err
			}
			elapsed := time.Since(start)
			done += int64(len(w.rows))
			res.Batches++
			res.Rows += int64(len(w.rows))
			res.Inserted += w.ins
			res.Updated += w.upd
			res.Skipped += int64(len(w.rows)) - w.ins - w.upd
			res.LastKey = w.last
			if c.OnBatch != nil {
				c.OnBatch(spec.Shard, Progress{Rows: int64(len(w.rows)), Inserted: w.ins, Updated: w.upd, LastKey: w.last, Elapsed: elapsed})
			}
			if res.Batches == 1 && c.AfterFirst != nil {
				c.AfterFirst(w.rows)
			}
			rest = page{rows: rest.rows[len(w.rows):]} // encoded again for its own batch
		}
	}
}

// lost explains why the lease context ended: the run itself was cancelled
// (a signal: not a lease problem), or the lease can no longer be trusted.
func lost(ctx, lctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("%w: %w", ErrLeaseLost, context.Cause(lctx))
}

func keyIndexes(spec Spec) ([]int, error) {
	idx := make([]int, len(spec.Key))
	for i, k := range spec.Key {
		idx[i] = -1
		for j, c := range spec.Columns {
			if c == k {
				idx[i] = j
			}
		}
		if idx[i] < 0 {
			return nil, fmt.Errorf("batch: key column %q is not among the copied columns", k)
		}
	}
	return idx, nil
}

func keyOf(row []any, idx []int) []any {
	k := make([]any, len(idx))
	for i, j := range idx {
		k[i] = row[j]
	}
	return k
}

// read sends pages of the shard in key order until the range ends (an empty
// page), an error, or ctx ends.
func (c *Copier) read(ctx context.Context, spec Spec, keyIdx []int, after []any, encode func([][]any) []byte, out chan<- page) {
	checked := time.Now()
	for {
		var rows [][]any
		err := c.retry(ctx, spec, "read", func() error {
			if c.SchemaCheck != nil && time.Since(checked) >= SchemaEvery {
				checked = time.Now()
				if err := c.SchemaCheck(ctx); err != nil {
					return permanent{fmt.Errorf("%w: %w", ErrHalted, err)}
				}
			}
			var err error
			rows, err = c.readPage(ctx, spec, after)
			switch {
			case c.SchemaCheck == nil:
			case err != nil && dialect.Classify(err) == dialect.Other:
				if serr := c.SchemaCheck(ctx); serr != nil {
					return permanent{fmt.Errorf("%w: %w (%w)", ErrHalted, serr, err)}
				}
			case err == nil && len(rows) == 0: // the end: once more before the shard is done
				if serr := c.SchemaCheck(ctx); serr != nil {
					return permanent{fmt.Errorf("%w: %w", ErrHalted, serr)}
				}
			}
			return err
		})
		pg := page{rows: rows, err: err}
		if err == nil {
			pg.bulk = encode(rows)
		}
		select {
		case out <- pg:
		case <-ctx.Done():
			return
		}
		if err != nil || len(rows) == 0 {
			return
		}
		after = keyOf(rows[len(rows)-1], keyIdx)
	}
}

func (c *Copier) readPage(ctx context.Context, spec Spec, after []any) ([][]any, error) {
	q := c.SourceSQL.SelectPage(spec.Source, spec.Columns, spec.Key, after != nil, spec.Range, spec.BatchSize)
	out, err := c.query(ctx, spec, q.SQL, pick(q, len(spec.Key), after, spec.Range)...)
	if err != nil {
		return nil, fmt.Errorf("read %s after %v: %w", spec.Shard, after, err)
	}
	return out, nil
}

// pick lays out a query's parameters from its logical values: the key's
// n parts (none given before the first page), then the range's bounds.
func pick(q dialect.Query, n int, key []any, r dialect.Range) []any {
	values := make([]any, n, n+2)
	copy(values, key)
	values = append(values, r.Lo, r.Hi)
	return q.Bind(values)
}

// query reads source rows of spec's columns and converts them for the
// target. A value that cannot cross halts the shard, naming the row.
func (c *Copier) query(ctx context.Context, spec Spec, sql string, args ...any) ([][]any, error) {
	rows, err := c.Source.QueryContext(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// One backing array for the page's values, one scan buffer for all.
	n := len(spec.Columns)
	out := make([][]any, 0, spec.BatchSize)
	backing := make([]any, 0, spec.BatchSize*n)
	raw, ptrs := make([]any, n), make([]any, n)
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		backing = append(backing, raw...)
		vals := backing[len(backing)-n : len(backing) : len(backing)]
		if spec.Convert != nil {
			for i, v := range vals {
				if vals[i], err = spec.Convert(i, v); err != nil {
					key, _ := keyIndexes(spec)
					return nil, permanent{fmt.Errorf("%w: %s: row with key %v: column %q: %w", ErrHalted, spec.Shard, keyOf(vals, key), spec.Columns[i], err)}
				}
			}
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// ReadRows reads the source rows with the given keys, converted for the
// target as Copy converts them (for repair).
func (c *Copier) ReadRows(ctx context.Context, spec Spec, keys [][]any) ([][]any, error) {
	var args []any
	for _, k := range keys {
		args = append(args, k...)
	}
	out, err := c.query(ctx, spec, c.SourceSQL.SelectByKeys(spec.Source, spec.Columns, spec.Key, len(keys)), args...)
	if err != nil {
		return nil, fmt.Errorf("read %d rows of %s by key: %w", len(keys), spec.Shard, err)
	}
	return out, nil
}

// ReadLast reads the source rows of the batch that ends at key last (up to
// BatchSize rows with keys up to and including it, within the range), in
// key order, converted for the target: the last committed batch before a
// resume point.
func (c *Copier) ReadLast(ctx context.Context, spec Spec, last []any) ([][]any, error) {
	q := c.SourceSQL.SelectLast(spec.Source, spec.Columns, spec.Key, spec.Range, spec.BatchSize)
	out, err := c.query(ctx, spec, q.SQL, pick(q, len(spec.Key), last, spec.Range)...)
	if err != nil {
		return nil, fmt.Errorf("read the batch of %s up to %v: %w", spec.Shard, last, err)
	}
	slices.Reverse(out)
	return out, nil
}

// WriteRows upserts rows in one fenced transaction under lease, like a
// batch but without moving the cursor (for repair).
func (c *Copier) WriteRows(ctx context.Context, spec Spec, lease Lease, t fence.Token, owner string, rows [][]any) (ins, upd int64, err error) {
	return c.write(ctx, spec, lease, t, owner, rows, nil, nil, 0, false)
}

// DeleteRows deletes the target rows with the given keys in one fenced
// transaction under lease (for repair), and returns how many went.
func (c *Copier) DeleteRows(spec Spec, lease Lease, t fence.Token, owner string, keys [][]any) (n int64, err error) {
	tx, tctx, cancel, err := Begin(c.Target, c.TargetSQL, lease)
	if err != nil {
		return 0, err
	}
	defer cancel()
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := c.Fence.Check(tctx, tx, spec.Shard, t, owner); err != nil {
		return 0, err
	}
	var args []any
	for _, k := range keys {
		args = append(args, k...)
	}
	res, err := tx.ExecContext(tctx, c.TargetSQL.DeleteByKeys(spec.Target, spec.Key, len(keys)), args...)
	if err != nil {
		return 0, err
	}
	if n, err = res.RowsAffected(); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// SampleRead reads up to pages keyset pages of spec's source the way Copy
// does and returns how many rows it read; it writes nothing (a dry run's
// rate sample).
func (c *Copier) SampleRead(ctx context.Context, spec Spec, pages int) (int64, error) {
	keyIdx, err := keyIndexes(spec)
	if err != nil {
		return 0, err
	}
	var n int64
	var after []any
	for range pages {
		rows, err := c.readPage(ctx, spec, after)
		if err != nil || len(rows) == 0 {
			return n, err
		}
		n += int64(len(rows))
		after = keyOf(rows[len(rows)-1], keyIdx)
	}
	return n, nil
}

// written is one batch written by writeRetrying: the first rows of a page.
type written struct {
	rows     [][]any
	last     []any
	ins, upd int64
}

// writeRetrying writes the first rows of pg that the lease's runway can
// carry (all of them, unless a batch takes more than about half the lease:
// see runway) as one batch, retrying transient failures with backoff; each
// attempt is one whole transaction. done is the rows done before them.
func (c *Copier) writeRetrying(ctx context.Context, spec Spec, lease Lease, t fence.Token, owner string, keyIdx []int, pg page, encode func([][]any) []byte, done int64, p *pace, bulk *atomic.Bool) (w written, err error) {
	err = c.retry(ctx, spec, "write", func() error {
		n, err := c.runway(ctx, spec, lease, len(pg.rows), p)
		if err != nil {
			return err
		}
		w = written{rows: pg.rows[:n], last: keyOf(pg.rows[n-1], keyIdx)}
		data := pg.bulk
		if n < len(pg.rows) || data == nil {
			data = encode(w.rows)
		}
		left, start := time.Until(lease.Deadline()), time.Now()
		w.ins, w.upd, err = c.write(ctx, spec, lease, t, owner, w.rows, data, w.last, done+int64(n), false)
		if errors.Is(err, dialect.ErrConflict) || errors.Is(err, dialect.ErrNotBulk) {
			c.upsertFromHere(spec, bulk, err)
			pg.bulk = nil
			w.ins, w.upd, err = c.write(ctx, spec, lease, t, owner, w.rows, nil, w.last, done+int64(n), false)
		}
		if dialect.Classify(err) == dialect.Data && lease.Context().Err() == nil {
			return permanent{c.dataError(ctx, spec, lease, t, owner, w.rows, err)}
		}
		if err == nil {
			p.wrote(n, time.Since(start))
		} else if lctx := lease.Context(); lctx.Err() != nil {
			return permanent{lost(ctx, lctx)}
		} else if p.failed(n, time.Since(start), left) {
			return smaller{err}
		}
		return err
	})
	return w, err
}

// dataError describes a batch the target refused for a value (a Data
// error: too long, out of range, NULL, a constraint) and halts the shard:
// retrying cannot help. It finds the first such row by bisection, writing
// halves of the batch in transactions that are rolled back, and names its
// key and, when the driver or the type in the message tells, the column.
func (c *Copier) dataError(ctx context.Context, spec Spec, lease Lease, t fence.Token, owner string, rows [][]any, err error) error {
	keyIdx, kerr := keyIndexes(spec)
	lo, hi := 0, len(rows)
	for hi-lo > 1 && kerr == nil {
		mid := (lo + hi) / 2
		_, _, e := c.write(ctx, spec, lease, t, owner, rows[lo:mid], nil, nil, 0, true)
		switch {
		case e == nil:
			lo = mid
		case dialect.Classify(e) == dialect.Data:
			hi, err = mid, e
		default:
			hi = -1 // cannot tell (the lease ended, the target went away): report the batch
		}
	}
	where := fmt.Sprintf("the batch of %s", spec.Shard)
	if hi == lo+1 && kerr == nil {
		if _, _, e := c.write(ctx, spec, lease, t, owner, rows[lo:hi], nil, nil, 0, true); dialect.Classify(e) == dialect.Data {
			err = e
		}
		where = fmt.Sprintf("the row of %s with key %v", spec.Shard, keyOf(rows[lo], keyIdx))
	}
	col := dialect.ErrorColumn(err)
	if col == "" {
		col = columnByType(spec, err.Error())
	}
	if col != "" {
		where += fmt.Sprintf(", column %q", col)
	}
	return fmt.Errorf("%w: the target refused %s: %w; the whole batch was rolled back — fix the target column or the value, then `migrate resume`", ErrHalted, where, err)
}

// columnByType names the one target column whose type the message
// mentions (PostgreSQL's "value too long for type character varying(5)"
// names a type, not a column); "" when none or several do.
func columnByType(spec Spec, msg string) string {
	found := ""
	for i, c := range spec.Types {
		if c.Type == "" || !strings.Contains(msg, c.Type) {
			continue
		}
		if found != "" {
			return ""
		}
		found = spec.Columns[i]
	}
	return found
}

// upsertFromHere turns the bulk path off for the rest of the copy.
func (c *Copier) upsertFromHere(spec Spec, bulk *atomic.Bool, why error) {
	if bulk.Swap(false) && c.Log != nil {
		c.Log.Info("writing by upsert from here", "shard", spec.Shard.String(), "why", why)
	}
}

// write writes one batch in one transaction: fence check, rows (by bulk
// load of their encoding when bulk is not nil, else by the fenced upsert),
// cursor advance.
//
// A dry write rolls back instead of committing (dataError's probes).
func (c *Copier) write(ctx context.Context, spec Spec, lease Lease, t fence.Token, owner string, rows [][]any, bulk []byte, last []any, done int64, dry bool) (ins, upd int64, err error) {
	conn, err := c.Target.Conn(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("begin batch of %s: %w", spec.Shard, err)
	}
	defer conn.Close()
	tx, tctx, end, err := begin(conn, c.TargetSQL, lease)
	if err != nil {
		return 0, 0, fmt.Errorf("begin batch of %s: %w", spec.Shard, err)
	}
	defer end()
	defer func() {
		if err != nil || dry {
			_ = tx.Rollback()
		}
	}()
	if err := c.Fence.Check(tctx, tx, spec.Shard, t, owner); err != nil {
		if errors.Is(err, fence.ErrStale) {
			return 0, 0, permanent{err}
		}
		return 0, 0, err
	}
	if bulk != nil {
		err := c.TargetSQL.(dialect.BulkInserter).Load(tctx, conn, spec.Target, spec.Types, spec.FenceColumn, bulk, len(rows))
		if err != nil {
			return 0, 0, fmt.Errorf("insert batch of %s up to %v: %w", spec.Shard, last, err)
		}
		ins = int64(len(rows))
	}
	keyIdx, err := keyIndexes(spec)
	if err != nil {
		return 0, 0, permanent{err}
	}
	for _, chunk := range chunks(rows, (c.TargetSQL.MaxParams()-1)/(len(spec.Columns)+1)) {
		if bulk != nil {
			break
		}
		i, u, err := c.upsert(tctx, tx, spec, keyIdx, t, chunk)
		if err != nil {
			return 0, 0, fmt.Errorf("upsert batch of %s up to %v: %w", spec.Shard, last, err)
		}
		ins += i
		upd += u
	}
	if skipped := int64(len(rows)) - ins - upd; skipped > 0 {
		// The fence check passed, yet rows carry a newer token: something
		// else (another plan, a re-shard) wrote this table. Not ours to
		// overwrite, and not to be reported as copied.
		return 0, 0, permanent{fmt.Errorf("%w: %d rows of the batch of %s up to %v hold a newer token than %d in the target; another writer owns them",
			ErrHalted, skipped, spec.Shard, last, t)}
	}
	if dry {
		return ins, upd, nil
	}
	if last != nil {
		if err := c.Cursor.Advance(tctx, tx, spec.Shard, last, done-int64(len(rows)), done, t); err != nil {
			if errors.Is(err, cursor.ErrMoved) {
				return 0, 0, permanent{err}
			}
			return 0, 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("commit batch of %s up to %v: %w", spec.Shard, last, err)
	}
	return ins, upd, nil
}

// maxStatementBytes bounds the values one upsert statement carries, well
// under MySQL's default max_allowed_packet (64 MiB): a batch of large rows
// is written in several statements of the same transaction.
const maxStatementBytes = 16 << 20

// chunks splits a batch into statements of at most per rows and about
// maxStatementBytes of values.
func chunks(rows [][]any, per int) [][][]any {
	var out [][][]any
	start, size := 0, 0
	for i, r := range rows {
		n := rowBytes(r)
		if i > start && (i-start >= per || size+n > maxStatementBytes) {
			out = append(out, rows[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(rows) {
		out = append(out, rows[start:])
	}
	return out
}

// rowBytes estimates the bytes a row's values take on the wire.
func rowBytes(r []any) int {
	n := 0
	for _, v := range r {
		switch v := v.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		default:
			n += 16
		}
	}
	return n
}

// Begin starts a READ COMMITTED transaction bounded by the lease (so every
// statement sees the latest commits, as a takeover must): its context ends at the
// lease's local deadline, and the server itself aborts any statement, lock
// wait or idle pause that would outlast it (F3), so a holder frozen inside
// the transaction cannot keep it open past its lease. Statements use the
// returned context. The transaction runs on a connection of its own; done,
// called once the transaction has ended, restores the session's settings
// that the bound changed (MySQL's are the session's) and gives the
// connection back to the pool.
func Begin(db *sql.DB, b Bounder, lease Lease) (tx *sql.Tx, tctx context.Context, done func(), err error) {
	conn, err := db.Conn(lease.Context())
	if err != nil {
		return nil, nil, nil, err
	}
	tx, tctx, end, err := begin(conn, b, lease)
	if err != nil {
		_ = conn.Close()
		return nil, nil, nil, err
	}
	return tx, tctx, func() { end(); _ = conn.Close() }, nil
}

// begin is Begin on conn, which stays open; end undoes the bound.
func begin(conn *sql.Conn, b Bounder, lease Lease) (*sql.Tx, context.Context, func(), error) {
	deadline := lease.Deadline()
	tctx, cancel := context.WithDeadline(lease.Context(), deadline)
	tx, err := conn.BeginTx(tctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	end := func() {
		cancel()
		_ = tx.Rollback() // sql.ErrTxDone after a commit or rollback: nothing done
		unbind(conn, b, lease)
	}
	q, args := b.BoundTx(time.Until(deadline))
	if _, err := tx.ExecContext(tctx, q, args...); err != nil {
		end()
		return nil, nil, nil, err
	}
	return tx, tctx, end, nil
}

// unbind restores on conn what the bound changed beyond its transaction
// (b.UnboundTx). A connection that cannot be restored is closed rather
// than given back to the pool with the bound's short timeouts.
func unbind(conn *sql.Conn, b Bounder, lease Lease) {
	q := b.UnboundTx()
	if q == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(lease.Context()), unbindTimeout)
	defer cancel()
	if _, err := conn.ExecContext(ctx, q); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// unbindTimeout bounds the restore of a session after a bounded transaction.
const unbindTimeout = 5 * time.Second

// upsertSQL builds the upsert of n rows once per table and size (1000 rows
// of 10 columns take a PostgreSQL statement of 10,000 parameters).
func (c *Copier) upsertSQL(spec Spec, n int) dialect.Upsert {
	key := fmt.Sprint(spec.Target, n)
	if st, ok := c.upserts.Load(key); ok {
		return st.(dialect.Upsert)
	}
	st := c.TargetSQL.Upsert(spec.Target, spec.Columns, spec.Key, spec.FenceColumn, n)
	c.upserts.Store(key, st)
	return st
}

func (c *Copier) upsert(ctx context.Context, tx *sql.Tx, spec Spec, keyIdx []int, t fence.Token, rows [][]any) (ins, upd int64, err error) {
	st := c.upsertSQL(spec, len(rows))
	args := make([]any, 0, len(rows)*(len(spec.Columns)+1))
	for _, r := range rows {
		args = append(args, r...)
		if st.TokenPerRow {
			args = append(args, int64(t))
		}
	}
	if !st.TokenPerRow {
		args = append(args, int64(t))
	}
	if st.Returns {
		err = tx.QueryRowContext(ctx, st.SQL, args...).Scan(&ins, &upd)
		return ins, upd, err
	}
	// Count the rows that exist and those with a newer token before
	// writing; the engine's affected-row count cannot tell them apart.
	probe := make([]any, 0, 1+len(rows)*len(keyIdx))
	probe = append(probe, int64(t))
	for _, r := range rows {
		probe = append(probe, keyOf(r, keyIdx)...)
	}
	var exist, newer int64
	if err := tx.QueryRowContext(ctx, st.Probe, probe...).Scan(&exist, &newer); err != nil {
		return 0, 0, fmt.Errorf("probe: %w", err)
	}
	if _, err := tx.ExecContext(ctx, st.SQL, args...); err != nil {
		return 0, 0, err
	}
	return int64(len(rows)) - exist, exist - newer, nil
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// retry runs fn until it succeeds, fails permanently, or fails
// spec.MaxRetries+1 times in a row; then it returns ErrHalted with the last
// error. A database that is unavailable (dialect.Unavailable) is waited
// for up to spec.MaxOutage from its first such failure without counting
// attempts; a batch that did not fit the lease's runway is tried again at
// once, smaller (retry.Budget).
func (c *Copier) retry(ctx context.Context, spec Spec, what string, fn func() error) error {
	sh := spec.Shard
	kind := func(err error) retry.Kind {
		switch {
		case errors.As(err, new(permanent)):
			return retry.Final
		case errors.As(err, new(smaller)):
			return retry.Now
		case dialect.Classify(err) == dialect.Unavailable:
			return retry.Outage
		}
		return retry.Failure
	}
	onRetry := func(err error, k retry.Kind, attempt int, wait time.Duration) {
		if c.OnFailure != nil {
			c.OnFailure(sh, err)
		}
		if c.Log != nil {
			msg := "batch failed, retrying"
			if k == retry.Outage {
				msg = "database unavailable, retrying"
			}
			c.Log.Warn(msg, "shard", sh.String(), "op", what, "attempt", attempt, "backoff", wait, "err", err)
		}
	}
	err := retry.Do(ctx, &retry.Budget{MaxFailures: spec.MaxRetries, MaxOutage: spec.MaxOutage}, func() error {
		err := fn()
		if s := (smaller{}); errors.As(err, &s) && c.Log != nil {
			c.Log.Info("the batch did not fit the lease's runway; trying a smaller one", "shard", sh.String(), "err", s.err)
		}
		return err
	}, kind, onRetry)
	var p permanent
	var ex *retry.Exhausted
	switch {
	case errors.As(err, &p):
		return p.err
	case errors.As(err, &ex) && ex.Outage > 0:
		if c.OnFailure != nil {
			c.OnFailure(sh, ex.Err)
		}
		return fmt.Errorf("%w: %s %s: the database has been unavailable for %v (max %v): %w", ErrHalted, what, sh, ex.Outage.Round(time.Second), spec.MaxOutage, ex.Err)
	case errors.As(err, &ex):
		if c.OnFailure != nil {
			c.OnFailure(sh, ex.Err)
		}
		return fmt.Errorf("%w: %s %s failed %d times: %w", ErrHalted, what, sh, ex.Failures, ex.Err)
	}
	return err
}
