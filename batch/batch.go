// Package batch is the copy loop of one shard (SPEC §5 C1, C3, F1, F2):
// keyset reads from the source, and per batch one target transaction that
// checks the fence, upserts the rows idempotently with the writer's token in
// the fence column, and advances the cursor. A crash loses at most the one
// uncommitted batch; the next page is read while the current one is written.
// Repair's fenced writes (WriteRows, DeleteRows) are the same transaction
// without the cursor.
package batch

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/keyset"
	"github.com/migrate-dev/migrate/lock"
)

// TargetSQL is what the copier needs from the target dialect.
type TargetSQL interface {
	fence.Bounder
	Upsert(table []string, cols, key []string, fence string, rows int) dialect.Upsert
	DeleteByKeys(table []string, key []string, n int) string
	MaxParams() int
}

// Fencer checks the watermark at the start of every batch transaction.
type Fencer interface {
	CheckLease(ctx context.Context, tx fence.Tx, s fence.Shard, l fence.Lease) error
}

// Cursor advances the checkpoint inside the batch transaction.
type Cursor interface {
	Advance(ctx context.Context, q fence.Querier, s fence.Shard, lastKey []any, prevDone, rowsDone int64, t fence.Token) error
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
	Convert   keyset.Convert // nil: values go to the target as read
	// Types are the target's columns in Columns' order; with them a target
	// dialect that is a dialect.BulkInserter writes new rows in bulk.
	Types []dialect.Column
	// Passthrough: source and target are one engine whose dialect, a
	// dialect.RawCopier, moves these columns without decoding them
	// (dialect.RawCopier.Passthrough), and Convert is nil.
	Passthrough bool
}

// Committed is what is reported of each committed batch.
type Committed struct {
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
	Profile  *Profile // the time of each phase of the batches
}

// Copier copies shards from a source pool to a target pool.
type Copier struct {
	Source    *sql.DB
	SourceSQL keyset.SQL
	Target    *sql.DB
	TargetSQL TargetSQL
	Fence     Fencer
	Cursor    Cursor
	Log       *slog.Logger
	OnBatch   func(fence.Shard, Committed) // may be nil
	// AfterFirst, if set, is called with the rows of the first batch once it
	// has committed, before the copy goes on (a takeover checks them).
	AfterFirst func(rows [][]any)
	// OnFailure, if set, is called for each failed attempt at reading a
	// page or writing a batch that is not final (retried or halting).
	OnFailure func(fence.Shard, error)
	// SchemaCheck, if set, compares the source table with what the copy
	// was set up for; the reader calls it every SchemaEvery, after a failed
	// read and at the end of the range. An error halts the shard (the
	// source changed under the copy: a column added, dropped or retyped).
	SchemaCheck func(context.Context) error
	// Stream, if set, orders the copy's batches with a change stream that
	// writes the same tables (docs/streaming.md).
	Stream Stream

	upserts sync.Map // upsertSQL's statements
}

// Stream is the change stream's count of its transactions that wrote a
// table (stream/apply.AppliedCount). A page is read after the count was
// read; its batch's transaction locks the count shared, so that no stream
// transaction writes the table until it commits. A count that moved
// between the two means a change may have been applied after the page was
// read: the batch's rows are read again, by key, under the lock, and
// written by upsert, so the copy never overwrites a newer change with an
// older read.
type Stream interface {
	Applied(ctx context.Context, q fence.Tx, table string, lock bool) (int64, error)
}

// SchemaEvery is how often the reader checks the source's schema.
const SchemaEvery = 5 * time.Second

// Reader is the keyset reader of spec's source rows, converted for the
// target as a copy converts them (repair reads by key through it).
func (c *Copier) Reader(spec Spec) *keyset.Reader {
	return &keyset.Reader{DB: c.Source, SQL: c.SourceSQL, Table: spec.Source, Columns: spec.Columns, Key: spec.Key,
		Range: spec.Range, Limit: spec.BatchSize, Convert: spec.Convert}
}

// Copy copies the shard from the checkpoint from (its LastKey, nil for the
// start of the range, and its RowsDone) to the end of its range, writing
// under lease. It returns lock.ErrLost or a fence.ErrStale error when it
// must stop writing, hold.ErrHalted after MaxRetries consecutive failures or
// when the target holds rows written with a newer token.
func (c *Copier) Copy(ctx context.Context, spec Spec, lease fence.Lease, from cursor.Checkpoint) (Result, error) {
	done := from.RowsDone
	res := Result{Profile: new(Profile)}
	keyIdx, err := keyset.KeyIndexes(spec.Columns, spec.Key)
	if err != nil {
		return res, fmt.Errorf("batch: %w", err)
	}
	lctx := lease.Context()
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
		if err := bi.Encode(&buf, spec.Types, lease.Token(), rows); err != nil {
			c.upsertFromHere(spec, &bulk, err)
			return nil
		}
		return buf.Bytes()
	}
	// Between two databases of one engine, a table whose types allow it
	// is read and written without decoding its rows (passthrough), from
	// the start or, after a takeover, once its first batch is checked.
	_, srcRaw := c.SourceSQL.(dialect.RawCopier)
	_, dstRaw := c.TargetSQL.(dialect.RawCopier)
	passthrough := spec.Passthrough && srcRaw && dstRaw
	var raw atomic.Bool
	raw.Store(passthrough && c.AfterFirst == nil)
	last := from.LastKey // the cursor: the last key committed
	pages := c.pages(lctx, spec, keyIdx, last, encode, res.Profile, &raw, lease.Token())
	defer func() { pages.Close() }()
	sess := fence.NewSession(c.Target, c.TargetSQL)
	defer sess.Close()
	var p pace
	for {
		pg, more, err := pages.Next(lctx)
		switch {
		case lctx.Err() != nil:
			return res, lost(ctx, lctx)
		case err != nil:
			return res, err
		case !more:
			return res, nil
		}
		// A page is one batch unless the lease's runway cannot carry it:
		// then it is written in pieces, each a batch with its own cursor.
		for rest := pg; rest.len() > 0; {
			start := time.Now()
			w, err := c.writeRetrying(ctx, spec, lease, keyIdx, rest, encode, done, &p, &bulk, res.Profile, sess)
			var de errDecode
			if errors.As(err, &de) {
				// The target refused a raw page: read again from the
				// cursor, decoding.
				c.decodeFromHere(spec, &raw, de.err)
				pages.Close()
				pages = c.pages(lctx, spec, keyIdx, last, encode, res.Profile, &raw, lease.Token())
				break
			}
			if err != nil {
				return res, err
			}
			done += int64(w.n)
			last = w.last
			res.add(w)
			if c.OnBatch != nil {
				c.OnBatch(spec.Shard, Committed{Rows: int64(w.n), Inserted: w.ins, Updated: w.upd, LastKey: w.last, Elapsed: time.Since(start)})
			}
			if res.Batches == 1 && c.AfterFirst != nil {
				c.AfterFirst(w.rows)
				raw.Store(passthrough)
			}
			rest = rest.tail(w.n)
		}
	}
}

// add counts one committed batch.
func (r *Result) add(w written) {
	r.Batches++
	r.Rows += int64(w.n)
	r.Inserted += w.ins
	r.Updated += w.upd
	r.Skipped += int64(w.n) - w.ins - w.upd
	r.LastKey = w.last
}

// lost explains why the lease context ended: the run itself was cancelled
// (a signal: not a lease problem), or the lease can no longer be trusted.
func lost(ctx, lctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if cause := context.Cause(lctx); !errors.Is(cause, lock.ErrLost) {
		return fmt.Errorf("%w: %w", lock.ErrLost, cause)
	}
	return fmt.Errorf("stopped writing: %w", lock.ErrLost)
}
