// Package drill runs fault drills against real services (SPEC §8): it starts
// instances of the migrate binary on a plan — a holder and one or more
// standbys — injects a fault into the holder (SIGKILL, SIGSTOP, a network
// partition or a delayed write through an in-process toxiproxy, a restart
// of the lock service), waits for the plan to finish, verifies source against target and
// reports the takeover's RTO against the prediction, the rows replayed, the
// stale writes the target rejected and any it accepted. The stream drills
// do the same to the instance applying the change stream (run --follow)
// while a writer changes the source, then cut over (stream.go).
package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/runner"
	"github.com/migrate-dev/migrate/status"
)

// Kind is a fault drill.
type Kind string

// The drills of SPEC §8.
const (
	Kill         Kind = "kill"          // SIGKILL of the holder
	Pause        Kind = "pause"         // SIGSTOP of the holder until a standby took over, then SIGCONT
	ShortPause   Kind = "short-pause"   // SIGSTOP shorter than TTL - renew interval - margin: no takeover
	Partition    Kind = "partition"     // the holder cut from the lock service and the target until a standby took over
	LockRestart  Kind = "lock-restart"  // the lock service killed and restarted mid-copy, with its data and without
	RedisRestart Kind = "redis-restart" // lock-restart's first name, from when the lock service was always Redis
	LateWrite    Kind = "late-write"    // the holder's writes held by the proxy past the TTL, delivered after the takeover
	// The change stream's applier (run --follow, a writer changing the
	// source, a cutover at the end).
	StreamKill  Kind = "stream-kill"  // SIGKILL of the instance applying the change stream
	StreamPause Kind = "stream-pause" // SIGSTOP of it until a standby took the stream over, then SIGCONT
	// SIGKILL of the holder mid-copy, then of the instance that took over
	// right after it sent a run event and before it marked it delivered;
	// a fresh instance finishes; every event must reach the drill's
	// receiver.
	Notify Kind = "notify"
)

// Kinds lists every drill.
var Kinds = []Kind{Kill, Pause, ShortPause, Partition, LockRestart, RedisRestart, LateWrite, StreamKill, StreamPause, Notify}

// restartsLock reports whether the kind restarts the lock service.
func (k Kind) restartsLock() bool { return k == LockRestart || k == RedisRestart }

// Options configure a drill.
type Options struct {
	Kind Kind
	Plan *plans.Plan // the plan, flags applied
	// PlanArgs select the same plan in a child `migrate run`: -p FILE and
	// the flags that override it, except the DSNs, which children get
	// from the environment (MIGRATE_SOURCE, MIGRATE_TARGET, MIGRATE_LOCK)
	// so no password shows in a process list.
	PlanArgs []string
	Binary   string // the migrate binary; default os.Executable()
	// FaultAfter is how many rows the holder must have committed before
	// the fault; default three batches. The stream drills strike once the
	// stream has applied changes instead.
	FaultAfter int64
	// HolderLatency slows the holder: every response of the target to it
	// comes this much later (a latency toxic on its proxy), so that a small
	// table's copy lasts long enough for the fault.
	HolderLatency time.Duration
	Standbys      int // standby instances; default 1
	// WriteRate is the stream drills' writer's pace, source transactions
	// per second; default DefaultWriteRate.
	WriteRate float64
	// Persistence is lock-restart's: the lock service restarted with its
	// data ("on"), without it ("off": a replacement that lost every lease
	// and token counter), or "both" runs (default).
	Persistence string
	// Reset lets the drill start over on a plan that has run before: it
	// drops the plan's target tables and deletes its checkpoint and
	// watermark rows and what the lock service keeps of its leases.
	// Without it such a plan is refused with ErrNotFresh.
	Reset       bool
	RedisServer string       // redis-server binary for lock-restart of a Redis; default from PATH
	Log         *slog.Logger // the drill's log
	// OpenRunner opens a runner of a plan, connected to its target and
	// lock service and, unless targetOnly, its source (the CLI's wiring).
	OpenRunner func(ctx context.Context, plan *plans.Plan, opts runner.Options, targetOnly bool) (*runner.Runner, error)
	// OpenStatus opens the reader of a plan's state, on its target and
	// lock service (the CLI's wiring); close closes them.
	OpenStatus func(ctx context.Context, plan *plans.Plan, log *slog.Logger) (rd *status.Reader, close func(), err error)
	ChildLog   io.Writer // the instances' logs, each line prefixed; nil: kept for the report only
}

func (o *Options) defaults() error {
	if !slices.Contains(Kinds, o.Kind) {
		return fmt.Errorf("drill: unknown kind %q (one of %s)", o.Kind, kindList())
	}
	if o.Plan == nil {
		return errors.New("drill: no plan")
	}
	if o.OpenRunner == nil || o.OpenStatus == nil {
		return errors.New("drill: no OpenRunner or OpenStatus")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("drill: find the migrate binary: %w", err)
		}
		o.Binary = exe
	}
	if o.FaultAfter <= 0 {
		o.FaultAfter = 3 * int64(o.Plan.BatchSize)
	}
	if o.Standbys <= 0 {
		o.Standbys = 1
	}
	if o.Standbys > 8 {
		return fmt.Errorf("drill: %d standbys; at most 8", o.Standbys)
	}
	if o.Kind == Notify && o.Standbys != 1 {
		return fmt.Errorf("drill: %d standbys: the notify drill runs one, then a fresh instance", o.Standbys)
	}
	if o.Kind == Notify && o.Plan.File == "" {
		// The instances run a copy of the plan file whose notify: sends
		// to the drill: there is none to copy in the flags form.
		return errors.New("drill: the notify drill needs a plan file (-p PLAN)")
	}
	if o.Persistence == "" {
		o.Persistence = "both"
	}
	if !slices.Contains([]string{"on", "off", "both"}, o.Persistence) {
		return fmt.Errorf("drill: persistence %q: want on, off or both", o.Persistence)
	}
	if o.WriteRate == 0 {
		o.WriteRate = DefaultWriteRate
	}
	if o.WriteRate < 0 || o.WriteRate > 1000 {
		return fmt.Errorf("drill: write rate %v: want 1 to 1000 transactions per second", o.WriteRate)
	}
	if o.HolderLatency < 0 {
		return errors.New("drill: negative holder latency")
	}
	return nil
}

func kindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Run runs the drill of o.Kind (redis-restart once per persistence asked)
// and returns its reports. The error is for a drill that could not run: a
// bad option, unreachable services, a plan that is not fresh (ErrNotFresh).
// A drill that ran and failed its criteria returns a Result with Pass false.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	tgt, err := openTarget(ctx, o.Plan)
	if err != nil {
		return nil, err
	}
	defer tgt.close()
	if err := prepare(ctx, o, tgt); err != nil {
		return nil, err
	}
	variants := []string{""}
	if o.Kind.restartsLock() {
		variants = []string{o.Persistence}
		if o.Persistence == "both" {
			variants = []string{"off", "on"}
		}
	}
	res := &Result{Plan: o.Plan.Name, Pass: true, Drills: []Report{}}
	for i, v := range variants {
		if i > 0 { // the drill's own leftovers: start the next one fresh
			if err := tgt.reset(ctx); err != nil {
				return res, err
			}
		}
		rep := runOne(ctx, o, tgt, v)
		res.Drills = append(res.Drills, rep)
		res.Pass = res.Pass && rep.Pass
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	return res, nil
}

// prepare refuses a plan that is in use or has run before (unless Reset,
// which then starts it over).
func prepare(ctx context.Context, o Options, tgt *target) error {
	dirt, err := tgt.dirt(ctx)
	if err != nil {
		return err
	}
	rd, closeStatus, err := o.OpenStatus(ctx, o.Plan, o.Log)
	if err != nil {
		return err
	}
	defer closeStatus()
	st, err := rd.Read(ctx)
	if err != nil {
		return err
	}
	if len(st.Leases) > 0 {
		held := make([]string, len(st.Leases))
		for i, l := range st.Leases {
			held[i] = fmt.Sprintf("%s#%d by %s", l.Table, l.Shard, l.Owner)
		}
		return fmt.Errorf("%w: a lease of plan %s is held (%s): an instance is running it; stop it before a drill",
			ErrNotFresh, o.Plan.Name, strings.Join(held, ", "))
	}
	// Event ids are made of the plan, the subject and the fence token,
	// which start over after --reset: old events would be taken for the
	// drill's (recorded, delivered already).
	if len(st.Events) > 0 {
		dirt = append(dirt, fmt.Sprintf("the target holds run events of plan %s", o.Plan.Name))
	}
	if len(st.Tables) > 0 {
		dirt = append(dirt, fmt.Sprintf("the target holds %d checkpoints of plan %s", len(st.Tables), o.Plan.Name))
	}
	stream := st.Stream != nil
	if stream {
		dirt = append(dirt, fmt.Sprintf("the target holds the change stream of plan %s (%s)", o.Plan.Name, st.Stream.State))
	}
	if o.Kind.streams() && o.Plan.Source.Engine() == plans.Postgres && rd.Capture != nil {
		if _, ok, err := rd.Capture.Retained(ctx, ""); err == nil && ok {
			stream = true
			dirt = append(dirt, fmt.Sprintf("the source keeps the replication slot of plan %s", o.Plan.Name))
		}
	}
	n, units, err := rd.Remembered(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		dirt = append(dirt, fmt.Sprintf("the lock service remembers holders of %d leases of plan %s", n, o.Plan.Name))
	}
	if len(dirt) == 0 {
		return nil
	}
	if !o.Reset {
		return fmt.Errorf("%w: %s; a drill starts from an empty target: give --reset to drop the target tables and the plan's checkpoints, watermarks, change stream, run events and leases",
			ErrNotFresh, strings.Join(dirt, ", "))
	}
	o.Log.Warn("--reset: dropping the plan's target tables, checkpoints, watermarks, change stream, run events and leases", "plan", o.Plan.Name, "found", strings.Join(dirt, ", "))
	if stream { // its slot dropped first: the new run starts a stream of its own
		r, err := o.OpenRunner(ctx, o.Plan, runner.Options{Log: o.Log}, false)
		if err != nil {
			return err
		}
		err = r.Abandon(ctx)
		r.Close()
		if err != nil {
			return fmt.Errorf("abandon the change stream of plan %s: %w", o.Plan.Name, err)
		}
	}
	for _, u := range units {
		if err := rd.Locker.Forget(ctx, hold.Base(u)); err != nil {
			return fmt.Errorf("lock %s: %w", rd.Locker, err)
		}
	}
	return tgt.reset(ctx)
}
