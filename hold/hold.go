// Package hold runs one leased unit of work — a shard's copy, the
// post-load phase — through its life in this instance: acquire the lease
// or wait as a standby, claim the unit in the target's fence (ending the
// sessions of a frozen holder first, and raising the lock service's tokens
// when they are not above the watermark), do the work in transactions the
// fence guards, and end done, halted or fenced. What the unit is lives in
// its Work; what the loop uses of the lock service and of the target is
// declared here (Leases, Fence), sized to what it calls. Its outcomes are
// reported as Events to an observer (the run's report and metrics).
package hold

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/lock"
)

// The outcomes that end a unit in this instance; the CLI maps them to
// exit codes (SPEC §4).
var (
	// ErrFenced: this instance lost its lease or its token was refused, and
	// it stopped writing (exit 4).
	ErrFenced = errors.New("fenced: this instance lost its lease or its token was refused; it stopped writing")
	// ErrHalted: automatic recovery gave up on a unit, which needs an
	// operator (exit 5).
	ErrHalted = errors.New("halted: a shard needs an operator")
)

// Lease is a granted lease as the loop and a Work use it (*lock.Lease).
type Lease interface {
	fence.Lease
	Key() string
	// Previous is the holder the lock service granted it after.
	Previous() lock.Holder
	// Wait is how long the lease was unavailable before this grant.
	Wait() time.Duration
	Release(ctx context.Context) error
}

// Leases is the lock service as the loop uses it (Locker wraps a
// *lock.Locker).
type Leases interface {
	// Acquire returns a *lock.HeldError while another owner holds it.
	Acquire(ctx context.Context, base, owner string) (Lease, error)
	// RaiseToken makes the service's next token for base above atLeast.
	RaiseToken(ctx context.Context, base string, atLeast int64) error
	// WaitFree returns once base looks free to owner.
	WaitFree(ctx context.Context, base, owner string) error
}

// Watermark is a unit's fence row: the highest token claimed, and by whom.
type Watermark struct {
	Token fence.Token
	Owner string
}

// Fence is the target's side of a unit (Target is the real one).
type Fence interface {
	// Break ends the target sessions of earlier holders that still hold
	// u's watermark row, and returns how many it ended.
	Break(ctx context.Context, u fence.Shard) (int64, error)
	// Watermark reads u's watermark.
	Watermark(ctx context.Context, u fence.Shard) (Watermark, error)
	// Claim runs one transaction bounded by lease: it raises u's
	// watermark strictly to the lease's token (a *fence.StaleError when
	// the token is not above it), runs fn with the watermark it replaced,
	// and commits. It returns that watermark.
	Claim(lease Lease, u fence.Shard, fn func(context.Context, *sql.Tx, Watermark) error) (Watermark, error)
	// Do runs fn in a transaction bounded by lease that first checks
	// (and locks) u's watermark still holds the lease's token: a write
	// fenced like a batch.
	Do(lease Lease, u fence.Shard, fn func(context.Context, *sql.Tx) error) error
}

// Found is a unit's state as a look or a claim found it.
type Found struct {
	State     cursor.State
	UpdatedAt time.Time // when it last changed (a running unit's last commit)
	Token     int64     // the token that last changed it
}

// Work is what one unit is.
type Work interface {
	// Look reads the unit's state before any claim: a unit done or
	// halted is not claimed.
	Look(ctx context.Context) (Found, error)
	// Resume runs in the claim's transaction, after the fence was raised
	// (so after the last commit of any earlier holder), and reads the
	// unit's state as the claim finds it; lease is the claim's.
	Resume(ctx context.Context, tx *sql.Tx, lease Lease) (Found, error)
	// Run works the claimed unit; nil when it is done. An error wrapping
	// ErrHalted halts it; one made by Again gives the lease back and
	// takes the unit again; any other is fenced when the lease ended or
	// the target refused the token, and tried again otherwise.
	Run(ctx context.Context, c *Claim) error
	// Halted is the error of the unit found halted.
	Halted() error
}

// Announced is a Work that records, in the transaction of a claim that
// takes the unit over from a live holder, that it did (the run's outbox
// event): the takeover and its record commit together, under the claim's
// fence, or neither does.
type Announced interface {
	TakenOver(ctx context.Context, tx *sql.Tx, c *Claim) error
}

// Guarded is a Work whose claim runs inside a guard of its own (the
// post-load phase's: the plan's setup lock).
type Guarded interface {
	Guard(lease Lease, claim func() error) error
}

// Claim is a unit this instance holds: its lease, claimed in the fence.
type Claim struct {
	Unit  fence.Shard
	Lease Lease
	Found Found
	Last  Watermark // the fence row the claim replaced
	// Previous is the live holder this claim took over from (Owner ""
	// when none: a first claim, or one after a release), and Wait how
	// long the unit waited for it.
	Previous lock.Holder
	Wait     time.Duration
	Acquired time.Time     // when the lease was granted
	Elect    time.Duration // from the first look to the grant
	Took     time.Duration // the claim's transaction
}

// TakenOver reports whether the claim took the unit over from a live
// holder.
func (c *Claim) TakenOver() bool { return c.Previous.Owner != "" }

// Base names u's lease (lock.ShardBase).
func Base(u fence.Shard) string { return lock.ShardBase(u.Plan, u.Table, u.Index) }

// Kind is what happened to a unit.
type Kind int

const (
	Standby        Kind = iota // another instance holds the lease: waiting for it
	Claimed                    // this instance holds the unit
	Done                       // the unit is done (ByOther: found done)
	Halted                     // the unit is halted (ByOther: found halted)
	Fenced                     // the holder stopped writing (Stale: the target refused its token)
	RecoveryFailed             // a lease reclaimed from a live holder, but the claim failed
)

func (k Kind) String() string {
	return [...]string{"standby", "claimed", "done", "halted", "fenced", "recovery-failed"}[k]
}

// Event is one step of a unit's life, for an observer.
type Event struct {
	Kind     Kind
	Unit     fence.Shard
	Token    int64  // the lease's when this instance holds one; the unit's last writer's when found done
	Owner    string // the holder a standby waits for
	Previous lock.Holder
	ByOther  bool // Done, Halted: found so, not made so by this instance
	Stale    bool // Fenced: the target refused the token (not a lease lost)
}
