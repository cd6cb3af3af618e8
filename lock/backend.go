package lock

import (
	"context"
	"time"
)

// Backend is one lock service: the authority that grants, renews and frees
// leases — Redis (lock/redislock), etcd (lock/etcdlock), ZooKeeper
// (lock/zklock) or a database table (lock/dblock). Each method is one
// exchange with the service; the Locker adds what is the same for every
// service: the renewal loop, the local deadline on the monotonic clock and
// the loss signal. Every backend passes the conformance suite in
// lock/locktest unchanged.
//
// A backend never deletes or overwrites another owner's live lease (L3):
// a dead holder's lease is freed only by the service itself (a TTL, a
// session, a lease_until passing by the database's clock).
type Backend interface {
	// Acquire tries once to grant the lease named base to owner for ttl
	// (L1). Granted: with a token strictly above every token the service
	// issued for base before. Retried: owner already holds it (a call
	// retried after a timeout), and the stored grant comes back without a
	// new token. Held: another owner holds it; Grant says who.
	Acquire(ctx context.Context, base, owner string, ttl time.Duration) (Grant, error)
	// Renew extends owner's lease by ttl when owner still holds it with
	// token (L2). false means it does not — expired, or another's — and is
	// final: the lease is never created again by a renewal.
	Renew(ctx context.Context, base, owner string, token int64, ttl time.Duration) (bool, error)
	// Release frees owner's lease when owner still holds it with token
	// (L3, compare-and-delete) and records a clean release; false when it
	// did not hold it.
	Release(ctx context.Context, base, owner string, token int64) (bool, error)
	// Inspect reads the lease and its last holder; it changes nothing.
	Inspect(ctx context.Context, base string) (Info, error)
	// Raise makes every later grant's token above atLeast (L4: the
	// target's watermark is the authority); it never lowers anything.
	Raise(ctx context.Context, base string, atLeast int64) error
	// WaitFree returns nil once the service says owner may take the lease
	// (L5): it is free, or (ZooKeeper's queue) owner is next in line. It
	// never decides by the caller's clock; a polling backend asks at most
	// every poll (jittered), and service errors are logged, not returned.
	WaitFree(ctx context.Context, base, owner string, poll time.Duration) error
	// Forget deletes what the service keeps of base — its lease, last
	// holder and token counter — unless a holder has it: a drill's
	// --reset, with the target's fence rows deleted too.
	Forget(ctx context.Context, base string) error
	// MaxWait is the longest a dead holder's lease can outlive the
	// holder's last renewal before a standby waiting with poll is told it
	// is free: the wait part of the predicted RTO (SPEC §6).
	MaxWait(ttl, poll time.Duration) time.Duration
	// Ping checks that the service answers.
	Ping(ctx context.Context) error
	// Close ends the backend's connections (and a session's leases).
	Close() error
	// String names the service for messages, with no password.
	String() string
}

// Status is the outcome of one Acquire.
type Status int

// The outcomes of Acquire.
const (
	Held    Status = iota // another owner holds the lease
	Granted               // granted now, with a new token
	Retried               // already this owner's: the stored grant, no new token
)

// Grant is the reply of Backend.Acquire.
type Grant struct {
	Status Status
	Owner  string        // the holder: owner (Granted, Retried) or another (Held)
	Token  int64         // the holder's fencing token
	TTL    time.Duration // Held: the lease's remaining time on the service; 0 when it cannot tell
	At     time.Time     // Granted, Retried: when the lease was granted, by the service's clock where it has one
	Prev   Holder        // the holder recorded before this grant; zero when none
	// Wait is how long the lease stood unrenewed before this grant: from
	// the previous holder's last renewal to the grant (0 when there was
	// none, or it released cleanly). Redis and a database measure it by
	// their own clocks; etcd and ZooKeeper, which tell no time, by the
	// service's TTL plus the time since the standby saw the lease end.
	Wait time.Duration
}

// Holder is a past holder of a lease, as the service recorded it.
type Holder struct {
	Owner     string
	Token     int64
	RenewedAt time.Time // its last successful renewal (or release), by the service's clock; zero where the service keeps none
	Released  bool      // it released the lease cleanly
}

// Info is a snapshot of one lease.
type Info struct {
	Held      bool          // a holder has it
	Owner     string        // the holder's owner id (Held only)
	Token     int64         // the holder's fencing token (Held only)
	TTL       time.Duration // the lease's remaining time on the service (Held only; 0 when it cannot tell)
	RenewedAt time.Time     // the holder's last renewal by the service's clock (Held only; zero where unknown)
	Last      Holder        // the most recent holder, current or past (zero if none)
}
