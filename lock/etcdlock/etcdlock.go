// Package etcdlock is the etcd lock service (SPEC §5 L1–L5): a lease is a
// key attached to an etcd lease of the TTL, which only the etcd leader
// expires, and standbys watch the key for its deletion.
//
// The keys of the lease named base lie under the DSN's prefix (default
// "migrate"):
//
//	/<prefix>/<base>/lease   JSON {owner, offset, lease, ttl, at, prev, wait}, attached to
//	                         the etcd lease (its ID is in the value) and created only when absent
//	/<prefix>/<base>/last    JSON {owner, offset | token, released} of the most recent holder;
//	                         no lease, so the next holder learns whom it follows
//	/<prefix>/<base>/offset  the L4 offset, a decimal; no lease, it only ever goes up
//
// A grant's fencing token is the offset it read plus the lease key's
// CreateRevision: the cluster's revision, which rises with every write in
// the cluster, across leader changes and restarts, so every grant of a
// name has a token above the grants before it. A cluster that lost its
// data counts revisions from 1 again; the target's watermark then refuses
// the low token, and the runner raises the offset above it (Raise, L4)
// and takes the lease again.
//
// etcd keeps no clock a client can read: a grant's time (lock.Grant.At)
// is the granting client's, and how long a lease stood unrenewed before a
// takeover (lock.Grant.Wait) is estimated from when the standby saw the
// holder's key go (see WaitFree and waited).
package etcdlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/migrate-dev/migrate/lock"
)

// Log attribute keys, as the lock package's.
const (
	attrLease = "lease"
	attrErr   = "err"
)

// ErrClosed is returned by the calls of a closed Backend, and by those
// its Close ended.
var ErrClosed = errors.New("lock: etcd backend closed")

// expiryCheck is how often the etcd leader looks for expired leases: its
// lessor's run loop revokes them every 500ms (server/lease/lessor.go,
// runLoop; lease/lessor.go in etcd 3.4). A dead holder's key goes at most
// that long after its TTL ran out.
const expiryCheck = 500 * time.Millisecond

// Backend is a lock.Backend on one etcd cluster. Its methods are safe for
// concurrent use.
type Backend struct {
	cli    *clientv3.Client
	prefix string // "/<prefix>/": every key of every lease lies under it
	name   string // the redacted DSN
	log    *slog.Logger
	diag   func(err error) error // adds why TLS fails to an error of Ping, when it does

	mu    sync.Mutex
	held  map[string]holding // by base: the grants made or taken back here
	ended map[string]ending  // by base: the holder whose key WaitFree saw go

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// holding is a grant this backend made or took back, with the etcd lease
// it keeps alive.
type holding struct {
	owner string
	token int64
	lease clientv3.LeaseID
	rev   int64 // the lease key's CreateRevision
}

// ending is a holder whose lease key a standby saw deleted, and when.
type ending struct {
	owner string
	token int64
	ttl   time.Duration // its etcd lease's granted TTL
	seen  time.Time     // local, monotonic
}

// leaseValue is the value of a lease key.
type leaseValue struct {
	Owner  string    `json:"owner"`
	Offset int64     `json:"offset"`
	Lease  int64     `json:"lease"`   // the etcd lease ID the key is attached to
	TTL    int64     `json:"ttl"`     // the etcd lease's TTL, in seconds
	At     int64     `json:"at"`      // the grant, Unix ms by the granting client's clock
	Prev   prevValue `json:"prev"`    // the holder before
	WaitMs int64     `json:"wait_ms"` // the estimated wait before the grant
}

// prevValue is the holder before a grant, as the grant recorded it.
type prevValue struct {
	Owner    string `json:"owner,omitempty"`
	Token    int64  `json:"token,omitempty"`
	Released bool   `json:"released,omitempty"`
}

// lastValue is the value of a last key. A grant writes it in the
// transaction that creates the lease key, whose revision it cannot know
// in advance, so its token is the offset plus the last key's
// ModRevision; a release writes the token itself.
type lastValue struct {
	Owner    string `json:"owner"`
	Offset   int64  `json:"offset,omitempty"`
	Token    int64  `json:"token,omitempty"`
	Released bool   `json:"released,omitempty"`
}

// keys are the etcd keys of one lease name.
type keys struct{ lease, last, offset string }

func (b *Backend) keys(base string) keys {
	p := b.prefix + base + "/"
	return keys{lease: p + "lease", last: p + "last", offset: p + "offset"}
}

// String implements lock.Backend: the redacted DSN.
func (b *Backend) String() string { return b.name }

// Ping implements lock.Backend with a linearizable read, which needs a
// leader and a quorum.
func (b *Backend) Ping(ctx context.Context) error {
	ctx, done := b.bind(ctx)
	defer done()
	if _, err := b.cli.Get(ctx, b.prefix, clientv3.WithKeysOnly(), clientv3.WithLimit(1)); err != nil {
		if err = b.wrap(err); !errors.Is(err, ErrClosed) {
			err = b.diag(err)
		}
		return fmt.Errorf("lock: ping %s: %w", b.name, err)
	}
	return nil
}

// bind is ctx, cancelled too when the backend closes: etcd's client
// retries a call on a closed connection for seconds.
func (b *Backend) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(b.cli.Ctx(), func() { cancel(ErrClosed) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// wrap is the error of a call that failed: ErrClosed when the backend
// closed meanwhile; err marked lock.ErrUnavailable when the cluster did
// not answer (no member reachable, no leader, the leader changed: gRPC's
// Unavailable), so that a run waits it out as an outage; else err.
func (b *Backend) wrap(err error) error {
	select {
	case <-b.closed:
		return ErrClosed
	default:
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) && ee.Code() == codes.Unavailable || status.Code(err) == codes.Unavailable {
		return lock.Unavailable(err)
	}
	return err
}

// Close implements lock.Backend: it ends every call, watch and connection
// of the client; a WaitFree in progress returns ErrClosed. The etcd
// leases of the grants it holds are left to expire.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		close(b.closed)
		if err := b.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			b.closeErr = fmt.Errorf("lock: close %s: %w", b.name, err)
		}
	})
	return b.closeErr
}

// MaxWait implements lock.Backend: the leader deletes a dead holder's key
// at most expiryCheck after its TTL ran out, and a standby's watch is
// told at once. A leader change, or a restart, restarts the count: the
// new leader gives every lease its whole TTL again, plus an election
// timeout, as it cannot know when the old one last renewed them
// (lessor.Promote).
func (b *Backend) MaxWait(ttl, _ time.Duration) time.Duration { return ttl + expiryCheck }

// wholeSeconds is ttl in seconds, the only unit of etcd leases.
func wholeSeconds(ttl time.Duration) (int64, error) {
	if ttl < time.Second || ttl%time.Second != 0 {
		return 0, fmt.Errorf("lock: lease TTL %v: etcd grants leases in whole seconds (at least 1s)", ttl)
	}
	return int64(ttl / time.Second), nil
}

// decodeLease decodes the value of a lease key.
func decodeLease(key string, v []byte) (leaseValue, error) {
	var lv leaseValue
	if err := json.Unmarshal(v, &lv); err != nil || lv.Owner == "" || lv.Lease == 0 {
		return leaseValue{}, fmt.Errorf("lock: etcd key %s holds no lease of ours", key)
	}
	return lv, nil
}

// decodeLast decodes the value of a last key modified at modRev.
func decodeLast(key string, v []byte, modRev int64) (lock.Holder, error) {
	var lv lastValue
	if err := json.Unmarshal(v, &lv); err != nil {
		return lock.Holder{}, fmt.Errorf("lock: etcd key %s holds no record of ours", key)
	}
	h := lock.Holder{Owner: lv.Owner, Token: lv.Token, Released: lv.Released}
	if h.Token == 0 {
		h.Token = lv.Offset + modRev
	}
	return h, nil
}

// mustJSON is v in JSON.
func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings, numbers and booleans
	}
	return string(data)
}

// holding returns the grant of base this backend holds for owner with
// token, if it holds one.
func (b *Backend) holding(base, owner string, token int64) (holding, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[base]
	return h, ok && h.owner == owner && h.token == token
}

func (b *Backend) hold(base string, h holding) {
	b.mu.Lock()
	b.held[base] = h
	b.mu.Unlock()
}

// unhold forgets the grant of base held with token (any, for token 0).
func (b *Backend) unhold(base string, token int64) {
	b.mu.Lock()
	if h, ok := b.held[base]; ok && (token == 0 || h.token == token) {
		delete(b.held, base)
	}
	b.mu.Unlock()
}

var _ lock.Backend = (*Backend)(nil)
