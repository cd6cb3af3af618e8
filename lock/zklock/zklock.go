// Package zklock is the ZooKeeper lock service (SPEC §5 L1–L5): a lease is
// the first node of a queue of ephemeral sequential nodes, and lives as
// long as the ZooKeeper session of the process that created it.
//
// The nodes of the lease named base lie under /<prefix>/<escaped base>/:
//
//	queue/n-<owner>-<seq>  EPHEMERAL_SEQUENTIAL, {owner, timeout_ms}: one per
//	                       instance that holds the lease or waits for it; the
//	                       lowest sequence number holds it
//	last                   {owner, node, token, released, prev_*}: the most
//	                       recent holder, written when it was granted and
//	                       when it released
//	offset                 an integer added to every token (Raise)
//
// A holder's token is offset + the creation zxid of its queue node (see
// grant for why it only ever goes up). A node is queued only while its
// instance holds the lease or waits for it in WaitFree, where it watches
// the node just before its own, so a holder's end wakes one standby, not
// all of them; the node WaitFree returns with is kept for Acquire for one
// session timeout.
//
// The session's heartbeats, not the renewals, keep a lease on the server:
// a renewal checks, after a sync with the leader, that its node is still
// there and this session's. A
// holder that dies is dropped by the server when its session expires: one
// session timeout (the lease TTL) after the server last heard from it,
// rounded up to the server's tick. A process whose lease ended by its
// local deadline, its session still alive, deletes its own node one TTL
// after its last renewal, as a Redis key would expire. When the servers
// refuse the session's handshakes for longer than its timeout (a server
// that lost its data refuses every client that saw a newer transaction),
// the backend opens a new session.
package zklock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/plans"
)

// connectWait bounds how long Dial, and a replacement session, wait for
// the servers to grant a session.
const connectWait = 15 * time.Second

// Log attribute keys.
const (
	attrService = "service"
	attrLease   = "lease"
	attrOwner   = "owner"
	attrErr     = "err"
)

// Backend is a lock.Backend on one ZooKeeper ensemble, with one session
// for the process: every lease it grants ends with that session.
type Backend struct {
	name   string // the DSN, redacted
	prefix string // "/migrate"
	hosts  []string
	ttl    time.Duration
	acl    []zk.ACL
	user   string
	auth   []byte // "user:password" for digest authentication; nil without a user
	log    *slog.Logger

	mu        sync.Mutex
	s         *session
	replacing bool // a replacement session is being opened
	closed    bool
	nodes     map[key]*entry // this process's queue nodes: its leases and what WaitFree left for Acquire
	sightings map[key]sighting
	deleting  map[string]bool // paths of queue nodes deleteLater is deleting: never granted again
	wg        sync.WaitGroup  // every goroutine the backend starts
	done      chan struct{}   // closed by Close

	wakes int64 // watch events WaitFree received (tests read it; under mu)
}

// Dial opens a Backend on the ZooKeeper ensemble of dsn,
//
//	zk://[user:password@]host[:port][,host[:port]…][/prefix]
//
// (port 2181 when none; nodes under /prefix, "migrate" when none), with
// one session whose timeout is the lease TTL ttl. It waits for the
// session. When the servers grant a timeout below ttl (their
// maxSessionTimeout), it fails: a lease trusted longer than the session
// that holds it would be unsafe. Above ttl (their minSessionTimeout, two
// ticks), it warns: a standby then waits the longer timeout for a dead
// holder. With a user name, the session authenticates as that digest
// identity, and the nodes it creates only that identity may change (all
// may read them). Errors and logs never hold the password.
func Dial(dsn plans.DSN, ttl time.Duration, log *slog.Logger) (*Backend, error) {
	if dsn.Engine() != plans.ZooKeeper {
		return nil, fmt.Errorf("lock: %s is not a zk:// DSN", dsn)
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("lock: zookeeper %s: lease TTL %v too short", dsn, ttl)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	prefix := dsn.Database()
	if prefix == "" {
		prefix = "migrate"
	}
	b := &Backend{
		name: dsn.String(), prefix: "/" + prefix, hosts: dsn.Hosts(), ttl: ttl.Truncate(time.Millisecond),
		acl: zk.WorldACL(zk.PermAll), log: log, nodes: map[key]*entry{}, sightings: map[key]sighting{}, deleting: map[string]bool{}, done: make(chan struct{}),
	}
	if u := dsn.User(); u != "" {
		b.user, b.auth = u, []byte(u+":"+dsn.Password())
		b.acl = append(zk.DigestACL(zk.PermAll, u, dsn.Password()), zk.WorldACL(zk.PermRead)...)
	}
	s, err := b.open(nil)
	if err != nil {
		return nil, fmt.Errorf("lock: zookeeper %s: %w", b.name, err)
	}
	b.s = s
	return b, nil
}

// open starts a client on the ensemble and waits until it has a session
// (and, with a user, has authenticated), at most connectWait or until stop
// is closed.
func (b *Backend) open(stop <-chan struct{}) (*session, error) {
	l := newSessionLog(b.log, b.name)
	d := newDialer(func() time.Duration { return max(max(l.negotiated(), b.ttl)*2/3, time.Second) })
	conn, events, err := zk.Connect(b.hosts, b.ttl, zk.WithDialer(d.dial), zk.WithLogger(l))
	if err != nil {
		return nil, err
	}
	s := &session{conn: conn, events: events, dialer: d, log: l}
	timer := time.NewTimer(connectWait)
	defer timer.Stop()
	select {
	case <-l.ready:
	case <-timer.C:
		s.close()
		return nil, fmt.Errorf("no session within %v", connectWait)
	case <-stop:
		s.close()
		return nil, errClosed
	}
	switch got := l.negotiated(); {
	case got < b.ttl:
		s.close()
		return nil, fmt.Errorf("the servers granted a session timeout of %v, below the lease TTL %v (their maxSessionTimeout): "+
			"a lease trusted longer than the session that holds it would be unsafe; lower the TTL or raise maxSessionTimeout", got, b.ttl)
	case got > b.ttl:
		b.log.Warn("zookeeper granted a session timeout above the lease TTL (its minSessionTimeout is two ticks): a standby waits that long for a dead holder",
			attrService, b.name, "session_timeout", got, "ttl", b.ttl)
	}
	if b.auth != nil {
		res := make(chan error, 1)
		go func() { res <- conn.AddAuth("digest", b.auth) }() // ends with its reply, or when s closes
		select {
		case err = <-res:
		case <-timer.C:
			err = errors.New("no reply")
		case <-stop:
			err = errClosed
		}
		if err != nil {
			s.close()
			return nil, fmt.Errorf("authenticate as %q: %w", b.user, err)
		}
	}
	return s, nil
}

// current is the backend's session. A client whose handshakes the servers
// refuse for longer than the session timeout is replaced, in the
// background, by a new one: its session is over by then whatever the
// servers knew of it (a server that lost its data, for one, refuses every
// client that has seen a transaction it does not have, and would do so
// until its own transactions caught up).
func (b *Backend) current() (*session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed
	}
	s := b.s
	t := max(s.log.negotiated(), b.ttl)
	if refused := s.log.refusedFor(); refused > t+t/10 && !b.replacing {
		b.replacing = true
		b.log.Warn("zookeeper refused the session for longer than its timeout; opening a new one", attrService, b.name, "refused_for", refused)
		b.goLocked(func() { b.replace(s) })
	}
	return s, nil
}

// replace opens a session to replace old, and closes old.
func (b *Backend) replace(old *session) {
	s, err := b.open(b.done)
	b.mu.Lock()
	b.replacing = false
	if err != nil || b.closed {
		b.mu.Unlock()
		if err == nil {
			s.close()
		} else if !errors.Is(err, errClosed) {
			b.log.Warn("zookeeper: no new session", attrService, b.name, attrErr, err)
		}
		return
	}
	b.s = s
	b.mu.Unlock()
	old.close()
}

// timeout is the session timeout the servers granted at the last
// handshake (the TTL before the first).
func (b *Backend) timeout() time.Duration {
	b.mu.Lock()
	s := b.s
	b.mu.Unlock()
	if t := s.log.negotiated(); t > 0 {
		return t
	}
	return b.ttl
}

// goLocked runs f on a goroutine that Close waits for; b.mu is held and b
// is not closed.
func (b *Backend) goLocked(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// goTracked runs f on a goroutine that Close waits for; false when the
// backend is closed.
func (b *Backend) goTracked(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.goLocked(f)
	return true
}

// call runs f, one request on the session (go-zookeeper's calls take no
// context), on a goroutine of its own and returns its result, or ctx's
// error when ctx ends first. f ends by itself even then: with its reply,
// when its connection drops (go-zookeeper fails the requests it carried),
// or when Close ends the session. If ctx ended first and f succeeded,
// undo, if not nil, gets its result: a node created for a caller that
// gave up is deleted.
func call[T any](ctx context.Context, b *Backend, f func(*zk.Conn) (T, error), undo func(*session, T)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	s, err := b.current()
	if err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	var mu sync.Mutex
	gaveUp := false
	res := make(chan result, 1)
	if !b.goTracked(func() {
		v, err := f(s.conn)
		mu.Lock()
		defer mu.Unlock()
		if gaveUp {
			if err == nil && undo != nil {
				undo(s, v)
			}
			return
		}
		res <- result{v, err}
	}) {
		return zero, errClosed
	}
	select {
	case r := <-res:
		return r.v, unanswered(r.err)
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-res: // it came back meanwhile: keep it
		return r.v, unanswered(r.err)
	default:
		gaveUp = true
		return zero, ctx.Err()
	}
}

// deleteLater deletes the queue node path, which the ZooKeeper session
// id created (0: s's session now), in the background, trying again
// after connection errors, until it is gone, that session is over (its
// ephemeral nodes with it; a later node of the same name is not its) or
// the backend closes.
func (b *Backend) deleteLater(s *session, path string, id int64) {
	if id == 0 {
		if id = s.id(); id == 0 {
			return // no session now: the one that created it is over
		}
	}
	b.mu.Lock()
	b.deleting[path] = true
	b.mu.Unlock()
	done := func() {
		b.mu.Lock()
		delete(b.deleting, path)
		b.mu.Unlock()
	}
	if !b.goTracked(func() {
		defer done()
		for {
			b.mu.Lock()
			replaced := b.s != s
			b.mu.Unlock()
			if replaced || s.id() != id {
				return
			}
			err := s.conn.Delete(path, -1)
			if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing) {
				return
			}
			b.log.Debug("zookeeper: delete a queue node again", attrService, b.name, "node", path, attrErr, err)
			select {
			case <-b.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}) {
		done()
	}
}

// isDeleting reports whether deleteLater is deleting the node at path.
func (b *Backend) isDeleting(path string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deleting[path]
}

// String implements lock.Backend.
func (b *Backend) String() string { return b.name }

// Ping implements lock.Backend: the servers answer, and the prefix can be
// read.
func (b *Backend) Ping(ctx context.Context) error {
	_, err := call(ctx, b, func(c *zk.Conn) (bool, error) {
		ok, _, err := c.Exists(b.prefix)
		return ok, err
	}, nil)
	if err != nil {
		return fmt.Errorf("lock: zookeeper %s: %w", b.name, err)
	}
	return nil
}

// MaxWait implements lock.Backend: ttl + ttl/10. A dead holder's node
// goes when the server expires its session, one session timeout after it
// last heard from the holder, at the next tick of its clock; the
// standby's watch tells it at once, so poll plays no part. This assumes
// a server tick (tickTime) of at most a tenth of the session timeout: a
// timeout of ten ticks or more (with the 100ms ticks of
// scripts/services.sh, a TTL of a second or more); below that, the wait
// may be longer by up to a tick. When the servers granted a longer
// session than ttl, its timeout counts instead.
func (b *Backend) MaxWait(ttl, _ time.Duration) time.Duration {
	t := max(ttl, b.timeout())
	return t + t/10
}

// Close implements lock.Backend: it closes the session, whose ephemeral
// nodes — the leases it holds, the places it waits in — the servers
// delete at once, and returns when no goroutine of the backend or its
// client is left.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.done)
	for _, e := range b.nodes {
		e.timer.Stop()
	}
	s := b.s
	b.mu.Unlock()
	s.close()
	b.wg.Wait()
	return nil
}

var _ lock.Backend = (*Backend)(nil)
