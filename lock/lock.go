// Package lock is the Redis lease that allows exactly one instance to write a
// shard at a time (SPEC §5 L1–L5).
//
// A lease lives under a caller-chosen base name such as
// "migrate:{orders-move:public.orders:0}"; the braces are a hash tag, so every
// key of one lease lands in one cluster slot. The package derives these keys:
//
//	base:lease          hash {owner, token, renewed_ms, acquired_ms, prev_*} with a PX TTL
//	base:token          the fencing counter; no TTL, it only ever goes up
//	base:last           hash {owner, token, renewed_ms, released} of the most recent
//	                    holder; no TTL, so the next holder can measure how long it waited
//
// Package records keeps the takeover history and progress records under
// the same base.
//
// Every operation is one Lua script. A holder learns it may no longer write
// through [Lease.Context]; a dead holder's lease is reclaimed only by TTL expiry
// on the server, never by another client deleting it.
package lock

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClient is what the lease needs from go-redis; *redis.Client,
// *redis.ClusterClient and *redis.Ring satisfy it. Give the client
// ContextTimeoutEnabled: true so a renewal call is bounded by the lease
// deadline on the socket too (the lease is cancelled on time either way).
type RedisClient interface {
	redis.Scripter
}

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
)

// HeldError reports who holds a lease that Acquire could not take.
type HeldError struct {
	Key   string        // base name of the lease
	Owner string        // owner id of the holder
	Token int64         // fencing token of the holder
	TTL   time.Duration // remaining lease time on the server
}

// Error implements error.
func (e *HeldError) Error() string {
	return fmt.Sprintf("lock: lease %s held by %s (token %d, ttl %v)", e.Key, e.Owner, e.Token, e.TTL)
}

// Unwrap makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Options tune a Locker. Only TTL is required.
type Options struct {
	TTL        time.Duration // lease TTL on the server; required, at least 10ms, whole milliseconds
	RenewEvery time.Duration // renewal period; default TTL/3; must leave time before the local deadline
	Drift      time.Duration // clock-drift allowance; default and minimum TTL/100
	Margin     time.Duration // safety margin before the server's expiry; default TTL/10
	PollEvery  time.Duration // standby poll period; default TTL/10, capped at TTL/10; jittered ±20%
	Logger     *slog.Logger  // default: discards

	// OnRenewFailure, if set, is called (from the renewal goroutine) for each
	// failed renewal with the lease's key (LeaseKey) and the network error,
	// or ErrNotOwner when the lease is gone.
	OnRenewFailure func(key string, err error)
}

// Locker acquires and inspects leases on one Redis deployment.
type Locker struct {
	rdb  RedisClient
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

var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)
	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)
	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
	//go:embed inspect.lua
	inspectLua    string
	inspectScript = redis.NewScript(inspectLua)
	//go:embed raise.lua
	raiseLua    string
	raiseScript = redis.NewScript(raiseLua)
	//go:embed pttl.lua
	pttlLua    string
	pttlScript = redis.NewScript(pttlLua)
)

// New returns a Locker that keeps leases of opts.TTL on rdb.
func New(rdb RedisClient, opts Options) (*Locker, error) {
	if rdb == nil {
		return nil, errors.New("lock: nil redis client")
	}
	if opts.TTL < 10*time.Millisecond {
		return nil, fmt.Errorf("lock: TTL %v too short (at least 10ms)", opts.TTL)
	}
	opts.TTL = opts.TTL.Truncate(time.Millisecond) // PX takes milliseconds
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
	return &Locker{rdb: rdb, opts: opts, log: opts.Logger}, nil
}

// validity is how long after sending a successful acquire or renewal the
// holder may still trust its lease.
func (o Options) validity() time.Duration { return o.TTL - o.Drift - o.Margin }

// Options returns the options in effect, defaults filled in.
func (l *Locker) Options() Options { return l.opts }

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

func leaseKey(base string) string { return base + ":lease" }

// ShardBase is the base name of the lease of one shard — index of the
// target table table of plan — "migrate:{plan:table:index}": the braces
// are a cluster hash tag, so every key of a shard lands in one slot.
func ShardBase(plan, table string, index int) string {
	return "migrate:{" + plan + ":" + table + ":" + strconv.Itoa(index) + "}"
}

// PlanPrefix is what the keys of every shard of plan begin with (plan
// names hold neither ':' nor glob characters): a SCAN's pattern is
// PlanPrefix(plan) + "*".
func PlanPrefix(plan string) string { return "migrate:{" + plan + ":" }

// LeaseKey is the Redis key of the lease named base.
func LeaseKey(base string) string { return leaseKey(base) }
func tokenKey(base string) string { return base + ":token" }
func lastKey(base string) string  { return base + ":last" }

func checkBase(base string) error {
	if base == "" {
		return errors.New("lock: empty lease name")
	}
	return nil
}
