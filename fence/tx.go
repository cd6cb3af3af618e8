package fence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"
)

// Lease is the writer's identity and its right to write: the token and
// owner every fenced transaction is checked against, a context that ends the
// moment the lease can no longer be trusted, and the deadline that bounds
// every transaction. *lock.Lease is one.
type Lease interface {
	Token() int64
	Owner() string
	Context() context.Context
	Deadline() time.Time
}

// Bounder bounds a transaction on the server (a target dialect): BoundTx
// sets timeouts so that no statement, lock wait or idle pause outlasts the
// time left; UnboundTx restores what the bound changed beyond the
// transaction ("" when nothing); ReadCommitted makes READ COMMITTED the
// session's isolation level and BoundSession bounds every transaction of
// the session (Session).
type Bounder interface {
	BoundTx(remaining time.Duration) (string, []any)
	UnboundTx() string
	ReadCommitted() string
	BoundSession(remaining time.Duration) (string, []any)
}

// Begin starts a READ COMMITTED transaction bounded by the lease (so every
// statement sees the latest commits, as a takeover must): its context ends
// at the lease's local deadline, and the server itself aborts any
// statement, lock wait or idle pause that would outlast it (F3), so a
// holder frozen inside the transaction cannot keep it open past its lease.
// Statements use the returned context. The transaction runs on a connection
// of its own; done, called once the transaction has ended, restores the
// session's settings that the bound changed (MySQL's are the session's) and
// gives the connection back to the pool.
func Begin(db *sql.DB, b Bounder, lease Lease) (tx *sql.Tx, tctx context.Context, done func(), err error) {
	conn, err := db.Conn(lease.Context())
	if err != nil {
		return nil, nil, nil, err
	}
	tx, tctx, end, err := BeginOn(conn, b, lease)
	if err != nil {
		_ = conn.Close()
		return nil, nil, nil, err
	}
	return tx, tctx, func() { end(); _ = conn.Close() }, nil
}

// BeginOn is Begin on conn, which stays open (a bulk load needs the
// connection itself); end undoes the bound.
func BeginOn(conn *sql.Conn, b Bounder, lease Lease) (tx *sql.Tx, tctx context.Context, end func(), err error) {
	deadline := lease.Deadline()
	tctx, cancel := context.WithDeadline(lease.Context(), deadline)
	tx, err = conn.BeginTx(tctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	end = func() {
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

// Session is a connection a writer keeps for its transactions one after
// the other (a shard's copy), so that each begins in one round trip: READ
// COMMITTED is the session's level, set once, and the bound is the
// session's too (BoundSession), set to half the time left and set again
// only once less than that is left — with renewals, about once a copy. What
// the session's settings change is never restored: the connection is
// closed instead of going back to the pool, when the writer is done
// (Close) or a transaction on it failed (Discard). It is not safe for
// concurrent use.
type Session struct {
	db    *sql.DB
	b     Bounder
	conn  *sql.Conn
	bound time.Duration // the session's bound; 0: none yet
}

// NewSession returns a Session on db; it connects at its first Begin.
func NewSession(db *sql.DB, b Bounder) *Session { return &Session{db: db, b: b} }

// Begin starts a transaction on the session's connection (connecting first
// when it has none), bounded as BeginOn bounds one: its context ends at the
// lease's local deadline, and no statement, lock wait or idle pause on the
// server outlasts the time left. end ends the context and rolls back what
// was not committed; the connection stays open.
func (s *Session) Begin(lease Lease) (conn *sql.Conn, tx *sql.Tx, tctx context.Context, end func(), err error) {
	deadline := lease.Deadline()
	tctx, cancel := context.WithDeadline(lease.Context(), deadline)
	defer func() {
		if err != nil {
			cancel()
			s.Discard()
		}
	}()
	if s.conn == nil {
		if s.conn, err = s.db.Conn(tctx); err != nil {
			return nil, nil, nil, nil, err
		}
		if _, err = s.conn.ExecContext(tctx, s.b.ReadCommitted()); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	if left := time.Until(deadline); s.bound == 0 || left < s.bound {
		q, args := s.b.BoundSession(left / 2)
		if _, err = s.conn.ExecContext(tctx, q, args...); err != nil {
			return nil, nil, nil, nil, err
		}
		s.bound = left / 2
	}
	if tx, err = s.conn.BeginTx(tctx, nil); err != nil { // READ COMMITTED: the session's
		return nil, nil, nil, nil, err
	}
	return s.conn, tx, tctx, func() {
		cancel()
		_ = tx.Rollback() // sql.ErrTxDone after a commit or rollback: nothing done
	}, nil
}

// Discard closes the session's connection (after a failed transaction: in
// a state that is not worth finding out); the next Begin connects again.
func (s *Session) Discard() {
	if s.conn != nil {
		discard(s.conn)
		s.conn, s.bound = nil, 0
	}
}

// Close is Discard: the writer is done with the session.
func (s *Session) Close() { s.Discard() }

// discard closes conn for good, out of the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
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

// CheckLease is Check with the lease's token and owner.
func (f *Fence) CheckLease(ctx context.Context, tx Tx, s Shard, l Lease) error {
	return f.Check(ctx, tx, s, Token(l.Token()), l.Owner())
}
