package zklock

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/migrate-dev/migrate/lock"
)

// session is one go-zookeeper client, its ZooKeeper session, and what its
// log lines tell of it. A Backend has one at a time; it replaces it only
// when the servers refuse it for good (see Backend.current).
type session struct {
	conn   *zk.Conn
	events <-chan zk.Event // closed when the client's loop has ended
	dialer *dialer
	log    *sessionLog
}

// close ends the session on the server (its ephemeral nodes go at once)
// when it can still reach one, and waits until every goroutine of the
// client has ended. go-zookeeper waits up to a second for the server's
// reply to its close request; a connection that hangs (a partition) or a
// handshake in progress is then closed under it, and no new one is made.
func (s *session) close() {
	s.conn.Close()
	s.dialer.shut()
	for range s.events { // the client's loop closes it when it returns
	}
}

// id is the session's id; 0 while there is none (before the first
// handshake, and from an expiry until the next).
func (s *session) id() int64 { return s.conn.SessionID() }

// sessionLog is the go-zookeeper Logger of one session. It forwards every
// line to slog at debug level, and reads two of them, by their format:
// the handshake's "authenticated: id=%d, timeout=%d" — go-zookeeper keeps
// the timeout the server negotiated to itself — and "authentication
// failed", a handshake the server did not complete.
type sessionLog struct {
	log  *slog.Logger
	name string

	ready chan struct{} // closed at the first completed handshake
	once  sync.Once

	mu      sync.Mutex
	timeout time.Duration // negotiated by the last handshake
	refused time.Time     // the first of the handshakes that failed since the last one that completed; zero if none
}

// The go-zookeeper log formats the backend reads.
const (
	fmtAuthenticated = "authenticated: id=%d, timeout=%d"
	fmtAuthFailed    = "authentication failed: %s"
)

func newSessionLog(log *slog.Logger, name string) *sessionLog {
	return &sessionLog{log: log, name: name, ready: make(chan struct{})}
}

// Printf implements zk.Logger.
func (l *sessionLog) Printf(format string, args ...any) {
	switch format {
	case fmtAuthenticated:
		if len(args) == 2 {
			if ms, ok := asInt(args[1]); ok {
				l.mu.Lock()
				l.timeout, l.refused = time.Duration(ms)*time.Millisecond, time.Time{}
				l.mu.Unlock()
				l.once.Do(func() { close(l.ready) })
			}
		}
	case fmtAuthFailed:
		var err error
		if len(args) == 1 {
			err, _ = args[0].(error)
		}
		l.mu.Lock()
		switch {
		case errors.Is(err, zk.ErrSessionExpired):
			// The server answered: the session is over, and the client's
			// next handshake asks for a new one.
			l.refused = time.Time{}
		case l.refused.IsZero():
			l.refused = time.Now()
		}
		l.mu.Unlock()
	}
	l.log.Debug("zookeeper: "+fmt.Sprintf(format, args...), attrService, l.name)
}

// negotiated is the session timeout of the last handshake; 0 before the
// first.
func (l *sessionLog) negotiated() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.timeout
}

// refusedFor is how long every handshake has failed; 0 when the last one
// completed or none failed yet.
func (l *sessionLog) refusedFor() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refused.IsZero() {
		return 0
	}
	return time.Since(l.refused)
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	}
	return 0, false
}

// dialer makes the TCP connections of one session. It bounds each
// handshake by the client's receive timeout (two thirds of the session
// timeout, as ZooKeeper's Java client does), at least a second, instead
// of go-zookeeper's ten receive timeouts (13s for a 2s session): a server
// that accepts a connection in its first moments may never answer it, and
// a partition swallows the handshake. shut closes the connections it made
// and refuses new ones.
type dialer struct {
	handshake func() time.Duration

	mu     sync.Mutex
	closed bool
	conns  map[*boundConn]struct{}
}

var errClosed = errors.New("lock: zookeeper backend closed")

// errVanished: this session's queue node is gone, with the session that
// expired (or an operator's delete); a new session queues again.
var errVanished = lock.Unavailable(errors.New("the queue node vanished: the session expired"))

// unanswered marks the errors of a ZooKeeper that does not answer (no
// server reachable, the connection dropped, the session over or moved) as
// lock.ErrUnavailable, so that a run waits them out as an outage; they
// still match go-zookeeper's own errors.
func unanswered(err error) error {
	for _, e := range []error{zk.ErrNoServer, zk.ErrConnectionClosed, zk.ErrSessionExpired, zk.ErrSessionMoved} {
		if errors.Is(err, e) {
			return lock.Unavailable(err)
		}
	}
	return err
}

func newDialer(handshake func() time.Duration) *dialer {
	return &dialer{handshake: handshake, conns: map[*boundConn]struct{}{}}
}

// dial implements zk.Dialer.
func (d *dialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if d.isShut() {
		return nil, errClosed
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	bc := &boundConn{Conn: c, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		_ = c.Close()
		return nil, errClosed
	}
	d.conns[bc] = struct{}{}
	return bc, nil
}

func (d *dialer) isShut() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

func (d *dialer) shut() {
	d.mu.Lock()
	d.closed = true
	conns := d.conns
	d.conns = map[*boundConn]struct{}{}
	d.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

// boundConn is a connection whose deadlines are at most the dialer's
// handshake bound from now: go-zookeeper's longer ones are its
// handshake's; those of its requests and pings (the receive timeout) are
// not longer, and stay.
type boundConn struct {
	net.Conn
	d *dialer
}

func (c *boundConn) bound(t time.Time) time.Time {
	if limit := time.Now().Add(c.d.handshake()); !t.IsZero() && t.After(limit) {
		return limit
	}
	return t
}

func (c *boundConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.bound(t)) }
func (c *boundConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.bound(t)) }

func (c *boundConn) Close() error {
	c.d.mu.Lock()
	delete(c.d.conns, c)
	c.d.mu.Unlock()
	return c.Conn.Close()
}
