package pgstream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/migrate-dev/migrate/stream"
)

// deadAfter is how long a reader waits without any message from the
// server before it calls the connection dead. Every status update asks the
// server for a keepalive, so a live server answers well within it.
const deadAfter = 30 * time.Second

// Reader reads one replication stream; it implements stream.Reader. A
// goroutine owns the replication connection: it receives, decodes and
// buffers each transaction until its commit, hands it to Next, and sends
// the status updates.
type Reader struct {
	c      *Capture
	start  pglogrepl.LSN
	conn   *pgconn.PgConn
	types  *pgtype.Map
	out    chan item
	cancel context.CancelFunc
	done   chan struct{}

	acked  atomic.Uint64 // the highest position Ack was given (or the start)
	idle   atomic.Uint64 // a keepalive's WAL end received when nothing was pending
	queued atomic.Uint64 // End of the last transaction handed to Next

	mu         sync.Mutex // guards the lag fields
	walEnd     pglogrepl.LSN
	lastEnd    pglogrepl.LSN // of the last transaction Next returned
	readTo     pglogrepl.LSN // the WAL end when everything received was handed over
	lastCommit time.Time

	err       error // Next's: once the stream failed, every Next fails
	closeOnce sync.Once
	closeErr  error

	// The goroutine's own.
	rels     map[uint32]*relation
	rowMsg   rowMessage // the row change being decoded (its slices reused)
	cur      *pending
	lastRecv time.Time
	db       *sql.DB // for base types of domains, opened when needed
}

type item struct {
	tx  stream.Tx
	err error
}

// pending is the transaction being received.
type pending struct {
	start   pglogrepl.LSN
	changes []stream.Change
}

// textFormats are the replication session's settings of the formats of
// values sent as text.
var textFormats = map[string]string{
	"DateStyle":          "ISO, YMD",
	"IntervalStyle":      "postgres",
	"TimeZone":           "UTC",
	"extra_float_digits": "3",
	"bytea_output":       "hex",
}

// Open implements stream.Capture: START_REPLICATION on the plan's slot
// from pos, with pgoutput's protocol version 1 and the plan's publication.
// A slot that is missing or whose WAL was removed is stream.ErrGone. A slot
// another walsender reads is taken: that walsender is terminated (within
// takeSlotWithin).
func (c *Capture) Open(ctx context.Context, pos stream.Pos) (stream.Reader, error) {
	start, err := pglogrepl.ParseLSN(string(pos))
	if err != nil {
		return nil, fmt.Errorf("pgstream: open: position %q is not a PostgreSQL LSN (like 0/16B3748); Start returns the first position", pos)
	}
	cfg, err := pgconn.ParseConfig(c.dsn.Secret())
	if err != nil {
		return nil, fmt.Errorf("pgstream: postgres DSN %s: invalid", c.dsn) // pgconn's text may quote the input
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "migrate"
	// pgoutput sends values as text in the walsender's session formats:
	// the ones the decoding below reads, whatever the database or the
	// role sets (a DateStyle 'SQL, DMY', extra_float_digits 0 that rounds
	// floats, bytea_output 'escape').
	for k, v := range textFormats {
		cfg.RuntimeParams[k] = v
	}
	var conn *pgconn.PgConn
	for deadline := time.Now().Add(takeSlotWithin); ; {
		conn, err = pgconn.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("pgstream: open a replication connection to %s: %w; check the DSN and the credentials (the user also needs the REPLICATION attribute, and pg_hba.conf an entry allowing its replication connections)", c.dsn, err)
		}
		err = pglogrepl.StartReplication(ctx, conn, c.name, start, pglogrepl.StartReplicationOptions{
			Mode:       pglogrepl.LogicalReplication,
			PluginArgs: []string{"proto_version '1'", "publication_names '" + c.name + "'"}, // [a-z0-9_] only
		})
		if err == nil {
			break
		}
		_ = conn.Close(context.Background())
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			return nil, c.startError(err)
		}
		// The slot is read by another reader: an instance that held the
		// stream before, frozen or cut off from the target (its applier
		// is fenced). Its walsender would hold the slot until
		// wal_sender_timeout; the caller holds the stream's lease now.
		if err := c.endReader(ctx); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond): // the walsender releases the slot as it exits
		}
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &Reader{
		c: c, start: start, conn: conn, types: pgtype.NewMap(),
		out: make(chan item, 8), cancel: cancel, done: make(chan struct{}),
		rels: map[uint32]*relation{},
	}
	r.acked.Store(uint64(start))
	r.queued.Store(uint64(start)) // a keepalive short of where the reader began moves nothing back
	go r.run(rctx)
	return r, nil
}

// takeSlotWithin bounds how long Open tries to take the slot from another
// reader.
const takeSlotWithin = 10 * time.Second

// endReader terminates the walsender reading the slot, if any.
func (c *Capture) endReader(ctx context.Context) error {
	db, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	return c.terminateReader(ctx, db)
}

// startError explains START_REPLICATION's failure.
func (c *Capture) startError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "42704":
			return fmt.Errorf("%w: the replication slot %s does not exist (%s); copy the tables again", stream.ErrGone, c.name, pgErr.Message)
		case pgErr.Code == "55000" && strings.Contains(pgErr.Message, "no longer"):
			return fmt.Errorf("%w: the replication slot %s lost its WAL (%s); copy the tables again", stream.ErrGone, c.name, pgErr.Message)
		case pgErr.Code == "55006":
			return fmt.Errorf("pgstream: the replication slot %s is read by another process (%s); stop it, or wait for it to end", c.name, pgErr.Message)
		}
	}
	return fmt.Errorf("pgstream: start replication on the slot %s: %w", c.name, err)
}

// Next implements stream.Reader.
func (r *Reader) Next(ctx context.Context) (stream.Tx, error) {
	if r.err != nil {
		return stream.Tx{}, r.err
	}
	select {
	case it, ok := <-r.out:
		if !ok {
			r.err = errors.New("pgstream: the reader is closed")
			return stream.Tx{}, r.err
		}
		if it.err != nil {
			r.err = it.err
			return stream.Tx{}, r.err
		}
		end, _ := pglogrepl.ParseLSN(string(it.tx.End))
		r.mu.Lock()
		r.lastEnd, r.lastCommit = end, it.tx.Commit
		r.mu.Unlock()
		return it.tx, nil
	case <-ctx.Done():
		return stream.Tx{}, ctx.Err()
	}
}

// Ack implements stream.Reader: the next status update tells the server
// the highest position acknowledged. A position that is not an LSN is
// ignored.
func (r *Reader) Ack(pos stream.Pos) {
	lsn, err := pglogrepl.ParseLSN(string(pos))
	if err != nil {
		return
	}
	for {
		old := r.acked.Load()
		if uint64(lsn) <= old || r.acked.CompareAndSwap(old, uint64(lsn)) {
			return
		}
	}
}

// Behind implements stream.Reader: the server's WAL end (from its last
// message) minus the end of the last transaction Next returned, or minus
// the WAL end of the last keepalive when everything received before it had
// been handed over (the WAL in between holds nothing for this stream).
func (r *Reader) Behind() stream.Lag {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.walEnd == 0 {
		return stream.Lag{Bytes: -1}
	}
	read := max(r.lastEnd, r.readTo, r.start)
	if r.walEnd <= read {
		return stream.Lag{}
	}
	lag := stream.Lag{Bytes: int64(r.walEnd - read)}
	if !r.lastCommit.IsZero() {
		lag.Seconds = max(0, time.Since(r.lastCommit).Seconds())
	}
	return lag
}

// Close implements stream.Reader: it stops the goroutine, sends a last
// status update with the acknowledged position and closes the connection.
func (r *Reader) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		_ = r.conn.Conn().SetReadDeadline(time.Now()) // ends a receive waiting for the next message
		<-r.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if !r.conn.IsClosed() {
			_ = r.sendStatus(false)
		}
		r.closeErr = r.conn.Close(ctx)
		if r.db != nil {
			_ = r.db.Close()
		}
	})
	return r.closeErr
}

// sendStatus tells the server the acknowledged position as written,
// flushed and applied: what Ack was given, or an idle keepalive's WAL end.
func (r *Reader) sendStatus(reply bool) error {
	pos := pglogrepl.LSN(max(r.acked.Load(), r.idle.Load()))
	return pglogrepl.SendStandbyStatusUpdate(context.Background(), r.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos, ReplyRequested: reply,
	})
}

func (r *Reader) run(ctx context.Context) {
	defer close(r.done)
	defer close(r.out)
	err := r.loop(ctx)
	if ctx.Err() != nil {
		return // closed
	}
	select {
	case r.out <- item{err: err}:
	case <-ctx.Done():
	}
}

// loop receives until the connection fails or ctx ends, sending a status
// update every interval (asking for a keepalive, which proves the server
// alive) and whenever the server asks for one.
func (r *Reader) loop(ctx context.Context) error {
	var lastStatus, readDeadline time.Time
	r.lastRecv = time.Now()
	for {
		now := time.Now()
		if now.Sub(lastStatus) >= r.c.status {
			if err := r.sendStatus(true); err != nil {
				return fmt.Errorf("pgstream: send a status update on the slot %s: %w; open again from the last committed position", r.c.name, err)
			}
			lastStatus = now
		}
		if dead := max(deadAfter, 3*r.c.status); now.Sub(r.lastRecv) > dead {
			return fmt.Errorf("pgstream: no message from the server on the slot %s for %s: the connection is presumed dead; open again from the last committed position", r.c.name, dead)
		}
		// The next status update's time as the connection's read
		// deadline, and a receive without a context: pgconn watches a
		// context with a goroutine on every call, which was a quarter of
		// the reader's CPU at 40,000 changes/s. An ended ctx is seen
		// when the deadline passes, or at once through Close.
		if due := lastStatus.Add(r.c.status); !due.Equal(readDeadline) {
			if err := r.conn.Conn().SetReadDeadline(due); err != nil {
				return fmt.Errorf("pgstream: read the replication stream of the slot %s: %w; open again from the last committed position", r.c.name, err)
			}
			readDeadline = due
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg, err := r.conn.ReceiveMessage(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("pgstream: read the replication stream of the slot %s: %w; open again from the last committed position", r.c.name, err)
		}
		r.lastRecv = time.Now()
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			reply, err := r.copyData(ctx, m.Data)
			if err != nil {
				return err
			}
			if reply {
				if err := r.sendStatus(false); err != nil {
					return fmt.Errorf("pgstream: answer a keepalive on the slot %s: %w; open again from the last committed position", r.c.name, err)
				}
				lastStatus = time.Now()
			}
		case *pgproto3.ErrorResponse:
			return r.c.startError(pgconn.ErrorResponseToPgError(m))
		case *pgproto3.CopyDone:
			return fmt.Errorf("pgstream: the server ended the replication stream of the slot %s; open again from the last committed position", r.c.name)
		}
	}
}

// copyData handles one CopyData message; reply: the server asked for a
// status update.
func (r *Reader) copyData(ctx context.Context, data []byte) (reply bool, err error) {
	if len(data) == 0 {
		return false, nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return false, fmt.Errorf("pgstream: slot %s: %w", r.c.name, err)
		}
		r.mu.Lock()
		r.walEnd = max(r.walEnd, k.ServerWALEnd)
		if r.cur == nil && len(r.out) == 0 {
			r.readTo = max(r.readTo, k.ServerWALEnd)
		}
		r.mu.Unlock()
		// Nothing received is pending and every transaction handed over
		// was acknowledged: the WAL up to here holds nothing more for
		// this stream, and the slot may free it.
		// Nothing pending: the position moves on to the WAL end, as a Tx
		// without changes (stream.Reader), so that the committed position
		// follows the server's and a cutover finds the stream caught up.
		if r.cur == nil && len(r.out) == 0 && uint64(k.ServerWALEnd) > r.queued.Load() {
			select {
			case r.out <- item{tx: stream.Tx{End: stream.Pos(k.ServerWALEnd.String())}}:
				r.queued.Store(uint64(k.ServerWALEnd))
			default:
			}
		}
		if r.cur == nil && r.acked.Load() >= r.queued.Load() {
			for old := r.idle.Load(); uint64(k.ServerWALEnd) > old && !r.idle.CompareAndSwap(old, uint64(k.ServerWALEnd)); old = r.idle.Load() {
			}
		}
		return k.ReplyRequested, nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return false, fmt.Errorf("pgstream: slot %s: %w", r.c.name, err)
		}
		r.mu.Lock()
		r.walEnd = max(r.walEnd, x.ServerWALEnd)
		r.mu.Unlock()
		return false, r.xlog(ctx, x)
	}
	return false, nil
}

// xlog decodes one pgoutput message.
func (r *Reader) xlog(ctx context.Context, x pglogrepl.XLogData) error {
	if isRow(x.WALData) {
		return r.row(x)
	}
	msg, err := parse(x.WALData)
	if err != nil {
		return fmt.Errorf("pgstream: slot %s at %s: %w", r.c.name, x.WALStart, err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		rel, err := newRelation(r.types, m, func(oid uint32) (uint32, error) { return r.baseType(ctx, oid) })
		if err != nil {
			return err
		}
		r.rels[m.RelationID] = rel
		return nil
	case *pglogrepl.BeginMessage:
		r.cur = &pending{start: x.WALStart}
		return nil
	case *pglogrepl.CommitMessage:
		return r.commit(ctx, m)
	case *pglogrepl.TruncateMessage:
		names := make([]string, len(m.RelationIDs))
		for i, id := range m.RelationIDs {
			names[i] = fmt.Sprintf("relation %d", id)
			if rel := r.rels[id]; rel != nil {
				names[i] = rel.name()
			}
		}
		return fmt.Errorf("pgstream: TRUNCATE of %s is not supported while following changes; copy the table again", strings.Join(names, ", "))
	}
	return nil // Origin, Type, logical decoding messages
}

// row decodes a row change (rowMessage: the hot path, without pglogrepl's
// copy of every value) and adds it to the transaction.
func (r *Reader) row(x pglogrepl.XLogData) error {
	if err := r.rowMsg.decode(x.WALData); err != nil {
		return fmt.Errorf("pgstream: slot %s at %s: %w", r.c.name, x.WALStart, err)
	}
	rel := r.rels[r.rowMsg.relation]
	if rel == nil {
		return fmt.Errorf("pgstream: slot %s: a change of relation %d before its Relation message", r.c.name, r.rowMsg.relation)
	}
	ch, err := rel.change(&r.rowMsg)
	if err != nil {
		return err
	}
	if r.cur == nil {
		return fmt.Errorf("pgstream: slot %s: a change of %s.%s outside a transaction at %s", r.c.name, ch.Schema, ch.Table, x.WALStart)
	}
	r.cur.changes = append(r.cur.changes, ch)
	return nil
}

// commit hands the transaction to Next, unless it ends at or before the
// start (the server resends from the slot's confirmed position) or has no
// change of the published tables.
func (r *Reader) commit(ctx context.Context, m *pglogrepl.CommitMessage) error {
	cur := r.cur
	r.cur = nil
	if cur == nil {
		return fmt.Errorf("pgstream: slot %s: a commit at %s without its begin", r.c.name, m.CommitLSN)
	}
	if m.TransactionEndLSN <= r.start || len(cur.changes) == 0 {
		return nil
	}
	tx := stream.Tx{Changes: cur.changes, End: stream.Pos(m.TransactionEndLSN.String()), Commit: m.CommitTime}
	if cur.start > 0 && cur.start < m.TransactionEndLSN {
		tx.Bytes = int64(m.TransactionEndLSN - cur.start)
	}
	r.queued.Store(uint64(m.TransactionEndLSN))
	defer func() { r.lastRecv = time.Now() }() // waiting for Next is not the server's silence
	select {
	case r.out <- item{tx: tx}:
		return nil
	default:
	}
	tick := time.NewTicker(r.c.status)
	defer tick.Stop()
	for {
		select {
		case r.out <- item{tx: tx}:
			return nil
		case <-tick.C: // keep the walsender from timing out while Next is slow
			if err := r.sendStatus(false); err != nil {
				return fmt.Errorf("pgstream: send a status update on the slot %s: %w; open again from the last committed position", r.c.name, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
