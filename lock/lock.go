// Package lock is the lock layer of recovery (SPEC §5 L1–L5): a lease that
// allows exactly one instance to write a shard at a time, granted by a lock
// service — Redis, etcd, ZooKeeper or a database — behind one contract,
// [Backend]. A [Locker] turns a backend's grants into a [Lease] that renews
// itself, keeps a local deadline on the monotonic clock and hands out a
// context that is cancelled the moment the lease can no longer be trusted;
// that part is the same whichever service grants the lease.
//
// Every grant carries a fencing token strictly above any granted before it
// for that lease. A dead holder's lease is reclaimed only by the service
// itself (a TTL, a session's expiry, lease_until passing by the database's
// clock), never by another client deleting it.
package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/internal/retry"
)

var (
	// ErrHeld is matched (errors.Is) by the *HeldError Acquire returns when
	// another owner holds the lease.
	ErrHeld = errors.New("lock: lease held by another owner")
	// ErrLost is the cause (context.Cause) of a lease context cancelled because
	// the lease can no longer be trusted: a renewal found another owner (or no
	// lease), or the local deadline passed with no successful renewal.
	ErrLost = errors.New("lock: lease lost")
	// ErrNotOwner is returned by Release when the lease was no longer ours
	// (expired, or held by someone else). Retrying does not help.
	ErrNotOwner = errors.New("lock: not the owner")
	// ErrUnavailable is matched (errors.Is) by an error of a lock service
	// that did not answer: no server reachable, no leader, a session being
	// replaced, or no reply within the Locker's bound of a call. Waiting
	// (max_outage) may pass it; a caller backs off as for any outage.
	ErrUnavailable = errors.New("lock: service unavailable")
)

// Unavailable marks err as a lock service's not answering: errors.Is(…,
// ErrUnavailable) holds, err's own chain and text are kept. nil stays nil.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return unavailable{err}
}

type unavailable struct{ error }

func (u unavailable) Unwrap() []error { return []error{u.error, ErrUnavailable} }

// HeldError reports who holds a lease that Acquire could not take.
type HeldError struct {
	Key   string        // base name of the lease
	Owner string        // owner id of the holder
	Token int64         // fencing token of the holder
	TTL   time.Duration // remaining lease time on the service; 0 when it cannot tell
}

// Error implements error.
func (e *HeldError) Error() string {
	return fmt.Sprintf("lock: lease %s held by %s (token %d, ttl %v)", e.Key, e.Owner, e.Token, e.TTL)
}

// Unwrap makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Options tune a Locker. Only TTL is required.
type Options struct {
	TTL        time.Duration // lease TTL on the service; required, at least 10ms, whole milliseconds
	RenewEvery time.Duration // renewal period; default TTL/3; must leave time before the local deadline
	Drift      time.Duration // clock-drift allowance; default and minimum TTL/100
	Margin     time.Duration // safety margin before the service's expiry; default TTL/10
	PollEvery  time.Duration // standby poll period; default TTL/10, capped at TTL/10; jittered ±20%
	Logger     *slog.Logger  // default: discards

	// OnRenewFailure, if set, is called (from the renewal goroutine) for each
	// failed renewal with the lease's base name and the error, or
	// ErrNotOwner when the lease is gone.
	OnRenewFailure func(base string, err error)
}

// Locker acquires and inspects leases on one lock service.
type Locker struct {
	b    Backend
	opts Options
	log  *slog.Logger
}

// Log attribute keys.
const (
	attrKey   = "lease"
	attrOwner = "owner"
	attrToken = "token"
	attrErr   = "err"
)

// New returns a Locker that keeps leases of opts.TTL on b. The Locker owns
// b from then on: Close closes it.
func New(b Backend, opts Options) (*Locker, error) {
	if b == nil {
		return nil, errors.New("lock: nil backend")
	}
	if opts.TTL < 10*time.Millisecond {
		return nil, fmt.Errorf("lock: TTL %v too short (at least 10ms)", opts.TTL)
	}
	opts.TTL = opts.TTL.Truncate(time.Millisecond)
	if opts.RenewEvery == 0 {
		opts.RenewEvery = opts.TTL / 3
	}
	if opts.Drift < opts.TTL/100 {
		opts.Drift = opts.TTL / 100
	}
	if opts.Margin == 0 {
		opts.Margin = opts.TTL / 10
	}
	if opts.PollEvery <= 0 || opts.PollEvery > opts.TTL/10 {
		opts.PollEvery = opts.TTL / 10
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Margin < 0 {
		return nil, fmt.Errorf("lock: negative Margin %v", opts.Margin)
	}
	if opts.RenewEvery <= 0 || opts.RenewEvery >= opts.validity() {
		return nil, fmt.Errorf("lock: RenewEvery %v must be positive and below TTL-Drift-Margin (%v)",
			opts.RenewEvery, opts.validity())
	}
	return &Locker{b: b, opts: opts, log: opts.Logger}, nil
}

// validity is how long after sending a successful acquire or renewal the
// holder may still trust its lease.
func (o Options) validity() time.Duration { return o.TTL - o.Drift - o.Margin }

// Options returns the options in effect, defaults filled in.
func (l *Locker) Options() Options { return l.opts }

// Backend returns the lock service the Locker works on.
func (l *Locker) Backend() Backend { return l.b }

// String names the lock service, with no password.
func (l *Locker) String() string { return l.b.String() }

// MaxWait is the longest a standby waits, after the holder's last renewal,
// before it is told a dead holder's lease is free: the wait part of the
// predicted RTO (SPEC §6) on this service.
func (l *Locker) MaxWait() time.Duration { return l.b.MaxWait(l.opts.TTL, l.opts.PollEvery) }

// Ping checks that the lock service answers.
func (l *Locker) Ping(ctx context.Context) error { return l.b.Ping(ctx) }

// Close closes the backend.
func (l *Locker) Close() error { return l.b.Close() }

// Inspect reads the state of the lease named base, for status output and
// drills. It never changes anything.
func (l *Locker) Inspect(ctx context.Context, base string) (Info, error) {
	if err := checkBase(base); err != nil {
		return Info{}, err
	}
	var info Info
	err := l.bounded(ctx, "inspect", base, func(ctx context.Context) (err error) {
		info, err = l.b.Inspect(ctx, base)
		return err
	})
	return info, err
}

// RaiseToken makes every later grant's token of base above atLeast (L4:
// after the lock service lost its state, raise it to the target's
// watermark). It never lowers anything.
func (l *Locker) RaiseToken(ctx context.Context, base string, atLeast int64) error {
	if err := checkBase(base); err != nil {
		return err
	}
	if atLeast < 0 {
		return fmt.Errorf("lock: raise token of %s: negative value %d", base, atLeast)
	}
	return l.bounded(ctx, "raise", base, func(ctx context.Context) error { return l.b.Raise(ctx, base, atLeast) })
}

// bounded runs f, one call to the service, within a bound of its own —
// the TTL, 5 s at least — since the caller's context (a run's) has none
// and some clients wait for a server for ever (etcd's waits for a ready
// connection). A call that ran out of it while ctx is live, or failed on
// the network (a timeout, a connection refused, reset or closed), is the
// service's not answering: ErrUnavailable. Backends mark their clients'
// own such errors (no leader, no server) themselves.
func (l *Locker) bounded(ctx context.Context, what, base string, f func(context.Context) error) error {
	bound := max(l.opts.TTL, 5*time.Second)
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := f(cctx)
	switch {
	case err == nil || ctx.Err() != nil:
	case cctx.Err() != nil:
		return Unavailable(fmt.Errorf("lock: %s %s: no answer from %s within %v: %w", what, base, l.b, bound, err))
	case retry.Network(err):
		return Unavailable(err)
	}
	return err
}

// WaitFree blocks until the service says owner may take the lease named
// base (L5): it never decides by its own clock that the lease is free. It
// returns nil then, or the context's error.
func (l *Locker) WaitFree(ctx context.Context, base, owner string) error {
	if err := checkBase(base); err != nil {
		return err
	}
	return l.b.WaitFree(ctx, base, owner, l.opts.PollEvery)
}

// Forget deletes what the service keeps of base unless it is held (a
// drill's --reset).
func (l *Locker) Forget(ctx context.Context, base string) error {
	if err := checkBase(base); err != nil {
		return err
	}
	return l.b.Forget(ctx, base)
}

// NewOwnerID returns "<instance>-<32 hex chars>" with 128 bits from
// crypto/rand: unique per call. Make one per process start and never reuse it
// after a restart. instance is reduced to [A-Za-z0-9._-], at most 64 chars.
func NewOwnerID(instance string) string {
	var sb strings.Builder
	for _, r := range instance {
		if sb.Len() >= 64 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	if sb.Len() == 0 {
		sb.WriteString("migrate")
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return sb.String() + "-" + hex.EncodeToString(b[:])
}

// ShardBase is the name of the lease of one shard — index of the target
// table table of plan — "migrate:{plan:table:index}". On Redis the braces
// are a cluster hash tag, so every key of a shard lands in one slot; the
// other services use the name as it is (escaped where they must).
func ShardBase(plan, table string, index int) string {
	return "migrate:{" + plan + ":" + table + ":" + strconv.Itoa(index) + "}"
}

// PlanPrefix is what the names of every shard of plan begin with (plan
// names hold neither ':' nor glob characters).
func PlanPrefix(plan string) string { return "migrate:{" + plan + ":" }

func checkBase(base string) error {
	if base == "" {
		return errors.New("lock: empty lease name")
	}
	return nil
}
