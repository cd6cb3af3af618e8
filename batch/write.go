package batch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/keyset"
)

// written is one batch written by writeRetrying: the first n rows of a
// page (rows: nil for a raw page).
type written struct {
	rows     [][]any
	n        int
	last     []any
	ins, upd int64
}

// errDecode is a raw page the target refused (a row exists after all, a
// value its binary form cannot carry): the copy reads the rest, this page
// included, by decoding them.
type errDecode struct{ err error }

func (e errDecode) Error() string { return "passthrough refused: " + e.err.Error() }
func (e errDecode) Unwrap() error { return e.err }

// writeRetrying writes the first rows of pg that the lease's runway can
// carry (all of them, unless a batch takes more than about half the lease:
// see runway) as one batch, retrying transient failures with backoff; each
// attempt is one whole transaction. done is the rows done before them.
func (c *Copier) writeRetrying(ctx context.Context, spec Spec, lease fence.Lease, keyIdx []int, pg page, encode func([][]any) []byte, done int64, p *pace, bulk *atomic.Bool, prof *Profile, sess *fence.Session) (w written, err error) {
	err = c.retry(ctx, spec, "write", func() error {
		n, err := c.runway(ctx, spec, lease, pg.len(), p)
		if err != nil {
			return err
		}
		piece, last := pg.head(n, keyIdx)
		w = written{rows: piece.rows, n: n, last: last}
		data := piece.bulk
		if piece.raw == nil && data == nil {
			data = encode(w.rows)
		}
		left, start := time.Until(lease.Deadline()), time.Now()
		w.ins, w.upd, err = c.write(ctx, spec, lease, work{rows: w.rows, raw: piece.raw, bulk: data, last: w.last, done: done + int64(n), prof: prof, sess: sess, mark: piece.mark})
		refused := errors.Is(err, dialect.ErrConflict) || errors.Is(err, dialect.ErrNotBulk)
		switch {
		case piece.raw != nil && (refused || dialect.Classify(err) == dialect.Data) && lease.Context().Err() == nil:
			return permanent{errDecode{err}}
		case refused:
			c.upsertFromHere(spec, bulk, err)
			pg.bulk = nil
			w.ins, w.upd, err = c.write(ctx, spec, lease, work{rows: w.rows, last: w.last, done: done + int64(n), prof: prof, sess: sess, mark: piece.mark})
		}
		if dialect.Classify(err) == dialect.Data && lease.Context().Err() == nil {
			return permanent{c.dataError(ctx, spec, lease, w.rows, err)}
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

// work is one fenced write: its rows, their bulk encoding (nil: by the
// fenced upsert) or their raw form, and the cursor's advance to last with done rows in all
// (none when last is nil). A probe is rolled back instead of committed
// (dataError's). prof, if set, times the phases.
type work struct {
	rows  [][]any
	raw   *dialect.RawPage // instead of rows: the rows in the target's binary form
	bulk  []byte
	last  []any
	done  int64
	probe bool
	prof  *Profile
	sess  *fence.Session // the copy's connection; nil: one from the pool for this write
	mark  int64          // the stream's count before the rows were read (Copier.Stream)
}

// write writes one batch in one transaction: fence check, rows (by bulk
// load of their encoding, or by the fenced upsert), cursor advance.
func (c *Copier) write(ctx context.Context, spec Spec, lease fence.Lease, w work) (ins, upd int64, err error) {
	last, t := w.last, fence.Token(lease.Token())
	count := int64(len(w.rows))
	if w.raw != nil {
		count = int64(w.raw.Len())
	}
	prof, t0 := w.prof, time.Now()
	conn, tx, tctx, end, err := c.begin(ctx, lease, w.sess)
	if err != nil {
		return 0, 0, fmt.Errorf("begin batch of %s: %w", spec.Shard, err)
	}
	defer end()
	defer func() {
		if err != nil || w.probe {
			_ = tx.Rollback()
		}
		if err != nil && w.sess != nil {
			w.sess.Discard()
		}
	}()
	t0 = prof.since(PhaseBegin, t0)
	if err := c.Fence.CheckLease(tctx, tx, spec.Shard, lease); err != nil {
		if errors.Is(err, fence.ErrStale) {
			return 0, 0, permanent{err}
		}
		return 0, 0, err
	}
	t0 = prof.since(PhaseFence, t0)
	loaded := count
	if c.Stream != nil {
		if w, err = c.afterStream(tctx, tx, spec, w); err != nil {
			return 0, 0, err
		}
		loaded = int64(len(w.rows))
		if w.raw != nil {
			loaded = int64(w.raw.Len())
		}
	}
	if ins, upd, err = c.load(tctx, conn, tx, spec, w, t); err != nil {
		return 0, 0, err
	}
	if skipped := loaded - ins - upd; skipped > 0 {
		// The fence check passed, yet rows carry a newer token: something
		// else (another plan, a re-shard) wrote this table. Not ours to
		// overwrite, and not to be reported as copied.
		return 0, 0, permanent{fmt.Errorf("%w: %d rows of the batch of %s up to %v hold a newer token than %d in the target; another writer owns them",
			hold.ErrHalted, skipped, spec.Shard, last, t)}
	}
	if w.probe {
		return ins, upd, nil
	}
	t0 = prof.since(PhaseLoad, t0)
	if last != nil {
		if err := c.Cursor.Advance(tctx, tx, spec.Shard, last, w.done-count, w.done, t); err != nil {
			if errors.Is(err, cursor.ErrMoved) {
				return 0, 0, permanent{err}
			}
			return 0, 0, err
		}
	}
	t0 = prof.since(PhaseCursor, t0)
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("commit batch of %s up to %v: %w", spec.Shard, last, err)
	}
	prof.since(PhaseCommit, t0)
	prof.batch()
	return ins, upd, nil
}

// load writes w's rows in the transaction tx open on conn: by passthrough,
// by bulk load, or by the fenced upsert, and counts those inserted and
// updated.
func (c *Copier) load(ctx context.Context, conn *sql.Conn, tx *sql.Tx, spec Spec, w work, t fence.Token) (ins, upd int64, err error) {
	switch {
	case w.raw != nil:
		if err := c.TargetSQL.(dialect.RawCopier).LoadRaw(ctx, conn, spec.Target, spec.Types, spec.FenceColumn, *w.raw); err != nil {
			return 0, 0, fmt.Errorf("insert batch of %s up to %v: %w", spec.Shard, w.last, err)
		}
		return int64(w.raw.Len()), 0, nil
	case w.bulk != nil:
		if err := c.TargetSQL.(dialect.BulkInserter).Load(ctx, conn, spec.Target, spec.Types, spec.FenceColumn, w.bulk, len(w.rows)); err != nil {
			return 0, 0, fmt.Errorf("insert batch of %s up to %v: %w", spec.Shard, w.last, err)
		}
		return int64(len(w.rows)), 0, nil
	}
	keyIdx, err := keyset.KeyIndexes(spec.Columns, spec.Key)
	if err != nil {
		return 0, 0, permanent{fmt.Errorf("batch: %w", err)}
	}
	for _, chunk := range chunks(w.rows, (c.TargetSQL.MaxParams()-1)/(len(spec.Columns)+1)) {
		i, u, err := c.upsert(ctx, tx, spec, keyIdx, t, chunk)
		if err != nil {
			return 0, 0, fmt.Errorf("upsert batch of %s up to %v: %w", spec.Shard, w.last, err)
		}
		ins += i
		upd += u
	}
	return ins, upd, nil
}

// begin starts a batch's transaction on sess, or on a connection of the
// pool when sess is nil; end ends it and gives back what it took.
func (c *Copier) begin(ctx context.Context, lease fence.Lease, sess *fence.Session) (conn *sql.Conn, tx *sql.Tx, tctx context.Context, end func(), err error) {
	if sess != nil {
		return sess.Begin(lease)
	}
	if conn, err = c.Target.Conn(ctx); err != nil {
		return nil, nil, nil, nil, err
	}
	tx, tctx, done, err := fence.BeginOn(conn, c.TargetSQL, lease)
	if err != nil {
		_ = conn.Close()
		return nil, nil, nil, nil, err
	}
	return conn, tx, tctx, func() { done(); _ = conn.Close() }, nil
}

// WriteRows upserts rows in one fenced transaction under lease, like a
// batch but without moving the cursor (for repair).
func (c *Copier) WriteRows(ctx context.Context, spec Spec, lease fence.Lease, rows [][]any) (ins, upd int64, err error) {
	return c.write(ctx, spec, lease, work{rows: rows})
}

// DeleteRows deletes the target rows with the given keys in one fenced
// transaction under lease (for repair), and returns how many went.
func (c *Copier) DeleteRows(spec Spec, lease fence.Lease, keys [][]any) (n int64, err error) {
	tx, tctx, cancel, err := fence.Begin(c.Target, c.TargetSQL, lease)
	if err != nil {
		return 0, err
	}
	defer cancel()
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := c.Fence.CheckLease(tctx, tx, spec.Shard, lease); err != nil {
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

// dataError describes a batch the target refused for a value (a Data
// error: too long, out of range, NULL, a constraint) and halts the shard:
// retrying cannot help. It finds the first such row by bisection, writing
// halves of the batch in transactions that are rolled back, and names its
// key and, when the driver or the type in the message tells, the column.
func (c *Copier) dataError(ctx context.Context, spec Spec, lease fence.Lease, rows [][]any, err error) error {
	keyIdx, kerr := keyset.KeyIndexes(spec.Columns, spec.Key)
	lo, hi := 0, len(rows)
	for hi-lo > 1 && kerr == nil {
		mid := (lo + hi) / 2
		_, _, e := c.write(ctx, spec, lease, work{rows: rows[lo:mid], probe: true})
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
		if _, _, e := c.write(ctx, spec, lease, work{rows: rows[lo:hi], probe: true}); dialect.Classify(e) == dialect.Data {
			err = e
		}
		where = fmt.Sprintf("the row of %s with key %v", spec.Shard, keyset.KeyOf(rows[lo], keyIdx))
	}
	col := dialect.ErrorColumn(err)
	if col == "" {
		col = columnByType(spec, err.Error())
	}
	if col != "" {
		where += fmt.Sprintf(", column %q", col)
	}
	return fmt.Errorf("%w: the target refused %s: %w; the whole batch was rolled back — fix the target column or the value, then `migrate resume`", hold.ErrHalted, where, err)
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
		probe = append(probe, keyset.KeyOf(r, keyIdx)...)
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

// afterStream locks the stream's count of the table for the rest of the
// batch's transaction; when it moved since the rows were read, the rows are
// read again by key (those deleted since are gone), to be written by
// upsert (Stream). The count is first read without the lock, and the rows
// read again then if it moved: the lock, which every applier transaction
// writing the table waits for, is held while the rows are written, not
// while they are read from the source as well (unless the count moves
// once more in between).
func (c *Copier) afterStream(ctx context.Context, tx *sql.Tx, spec Spec, w work) (work, error) {
	for _, lock := range []bool{false, true} {
		n, err := c.Stream.Applied(ctx, tx, spec.Shard.Table, lock)
		if err != nil {
			if lock {
				return w, fmt.Errorf("lock the stream's count of %s: %w", spec.Shard.Table, err)
			}
			return w, fmt.Errorf("read the stream's count of %s: %w", spec.Shard.Table, err)
		}
		if n == w.mark {
			continue
		}
		if w, err = c.readAgain(ctx, spec, w); err != nil {
			return w, err
		}
		w.mark = n
	}
	return w, nil
}

// readAgain reads w's rows again by key from the source: those deleted
// since are gone.
func (c *Copier) readAgain(ctx context.Context, spec Spec, w work) (work, error) {
	keys := w.keys(spec)
	if len(keys) == 0 {
		return w, nil
	}
	rd := c.Reader(spec)
	var rows [][]any
	for part := range slices.Chunk(keys, max(1, (c.TargetSQL.MaxParams()-1)/(len(spec.Key)+1))) {
		got, err := rd.ByKeys(ctx, part)
		if err != nil {
			return w, fmt.Errorf("read the batch of %s up to %v again: %w", spec.Shard, w.last, err)
		}
		rows = append(rows, got...)
	}
	w.rows, w.raw, w.bulk = rows, nil, nil
	return w, nil
}

// keys are the keys of w's rows.
func (w work) keys(spec Spec) [][]any {
	if w.raw != nil {
		return w.raw.Keys
	}
	idx, err := keyset.KeyIndexes(spec.Columns, spec.Key)
	if err != nil {
		return nil
	}
	keys := make([][]any, len(w.rows))
	for i, r := range w.rows {
		keys[i] = keyset.KeyOf(r, idx)
	}
	return keys
}
