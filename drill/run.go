package drill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/migrate-dev/migrate/internal/netfault"
	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/internal/svcproc"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/status"
	"github.com/migrate-dev/migrate/stream/apply"
)

// Instance labels: the holder is drill-a, the standbys drill-b, drill-c, …
const holderName = "drill-a"

// standbyLog is what a standby logs when it starts waiting for a lease
// (runner); standbyGrace is how long the drill waits to see it.
const (
	standbyLog   = "lease held by another instance"
	standbyGrace = 10 * time.Second
)

type shardKey struct {
	table string
	shard int
}

// drill is one drill in progress.
type drill struct {
	o        Options
	plan     *plans.Plan // as the instances see it (lock-restart: the drill's own lock service)
	tgt      *target
	rep      *Report
	start    time.Time
	log      *slog.Logger
	status   *status.Reader
	closeSt  func()
	w        *watcher
	holder   *child
	standbys []*child
	tproxy   *netfault.Proxy    // the holder's way to the target
	lproxy   *netfault.Proxy    // the holder's way to the lock service; nil when it is the target
	lockSrv  *svcproc.Server    // lock-restart's own lock service
	wipe     bool               // lock-restart restarts it without its data
	owner    string             // the holder's owner id
	tokens   map[shardKey]int64 // the holder's token per shard at the fault
	taken    time.Time          // when the takeover was seen
	faultAt  time.Time
	late     netfault.Held
	hook     *hook // the notify drill's receiver and plan
	// the stream drills'
	wr        *writer // the source's writer
	streamTok int64   // the holder's token on the stream at the fault
}

// runOne runs one drill; persistence is "on" or "off" for lock-restart.
func runOne(ctx context.Context, o Options, tgt *target, persistence string) Report {
	ttl := o.Plan.LeaseTTL
	d := &drill{o: o, plan: o.Plan, tgt: tgt, start: time.Now(), tokens: map[shardKey]int64{},
		log: o.Log.With("drill", string(o.Kind)+map[string]string{"": "", "on": "/persistent", "off": "/volatile"}[persistence]),
		rep: &Report{Kind: o.Kind, Persistence: persistence, TTLMs: ttl.Milliseconds(), BatchSize: o.Plan.BatchSize,
			Instances: []Instance{}, Takeovers: []Takeover{}, Shards: []ShardOutcome{}, History: []Event{}}}
	if o.Kind.streams() {
		d.rep.Stream = &StreamReport{}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer d.close()
	err := d.drive(ctx, persistence)
	if err != nil {
		d.rep.Error = err.Error()
		d.log.Error("drill failed", "err", err)
		for _, c := range d.children() {
			c.wait(ctx, time.Millisecond) // stop what is left
		}
		if o.Kind.streams() && d.holder != nil {
			d.abandon(ctx)
		}
	}
	d.collect(ctx)
	d.rep.evaluate()
	if !d.rep.Pass {
		for i := range d.rep.Instances {
			d.rep.Instances[i].LogTail = d.children()[i].stderr.tail(20)
		}
	}
	d.log.Info("drill finished", "pass", d.rep.Pass)
	return *d.rep
}

func (d *drill) children() []*child {
	if d.holder == nil {
		return nil
	}
	return append([]*child{d.holder}, d.standbys...)
}

func (d *drill) close() {
	if d.wr != nil {
		d.wr.stop()
	}
	for _, c := range d.children() {
		if !c.exited() {
			c.wait(context.Background(), time.Millisecond)
		}
	}
	for _, p := range []*netfault.Proxy{d.tproxy, d.lproxy} {
		if p != nil {
			p.Close()
		}
	}
	if d.closeSt != nil {
		d.closeSt()
	}
	if d.lockSrv != nil {
		d.lockSrv.Kill()
		_ = os.RemoveAll(d.lockSrv.Dir())
	}
	if d.hook != nil {
		d.hook.close()
	}
}

// drive sets the drill up, starts the instances, injects the fault and
// waits for every instance to end.
func (d *drill) drive(ctx context.Context, persistence string) error {
	if d.o.Kind.restartsLock() {
		if err := d.startLock(ctx, persistence == "on"); err != nil {
			return err
		}
	}
	env, holderEnv, err := d.proxies()
	if err != nil {
		return err
	}
	standbyEnv := env
	if d.o.Kind == Notify {
		if holderEnv, standbyEnv, err = d.notifyUp(env, holderEnv); err != nil {
			return err
		}
	}
	if d.status, d.closeSt, err = d.o.OpenStatus(ctx, d.plan, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	d.rep.PredictedRtoMs = d.status.PredictedRTO().Milliseconds()
	d.w = newWatcher(d.status, d.plan.LeaseTTL, d.start, d.log)
	if d.o.Kind.streams() {
		d.w.mark = d.streamMark
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go d.w.run(wctx)

	d.log.Info("starting the holder", "instance", holderName, "target_proxy", d.tproxy.Addr(), "lock_proxy", d.lproxy.Addr(), "holder_latency", d.o.HolderLatency)
	if d.holder, err = startChild(ctx, d.o.Binary, holderName, "holder", d.childArgs(), holderEnv, d.o.ChildLog); err != nil {
		return fmt.Errorf("drill: start the holder: %w", err)
	}
	if d.o.Kind.streams() {
		err = errors.Join(d.startWriter(ctx), d.waitStreamHolder(ctx))
	} else {
		err = d.waitHolder(ctx)
	}
	if err != nil {
		return err
	}
	for i := range d.o.Standbys {
		name := fmt.Sprintf("drill-%c", 'b'+i)
		c, err := startChild(ctx, d.o.Binary, name, "standby", d.childArgs(), standbyEnv, d.o.ChildLog)
		if err != nil {
			return fmt.Errorf("drill: start standby %s: %w", name, err)
		}
		d.standbys = append(d.standbys, c)
	}
	if err := d.waitStandbys(ctx); err != nil {
		return err
	}
	if err := d.inject(ctx); err != nil {
		return err
	}
	if d.o.Kind.streams() {
		if err := d.cutover(ctx); err != nil {
			return err
		}
		return d.finishStream(ctx)
	}
	if d.o.Kind == Notify {
		if err := d.killSuccessor(ctx, env); err != nil {
			return err
		}
	}
	return d.finish(ctx)
}

// shards lists every shard of the plan.
func (d *drill) shards() []shardKey {
	var out []shardKey
	for _, t := range d.plan.Tables {
		for i := range t.Shards {
			out = append(out, shardKey{t.Name, i})
		}
	}
	return out
}

func rowsDone(st *status.Status) int64 {
	var n int64
	for _, t := range st.Tables {
		n += t.RowsDone
	}
	return n
}

// waitHolder waits until the holder holds every shard's lease (and, in
// the notify drill, the delivery of the run events) and has committed
// FaultAfter rows, and records its owner id and tokens.
func (d *drill) waitHolder(ctx context.Context) error {
	var finished string
	shards := d.shards()
	what := "the holder holding every shard with " + fmt.Sprint(d.o.FaultAfter) + " rows committed"
	if d.o.Kind == Notify {
		what += " and delivering the run events"
	}
	err := d.w.waitFor(ctx, 2*time.Minute, what, func(st *status.Status) bool {
		for _, t := range st.Tables {
			if t.State == "done" {
				finished = fmt.Sprintf("%s#%d", t.Table, t.Shard)
				return true
			}
		}
		held := map[shardKey]status.LeaseStatus{}
		for _, l := range st.Leases {
			// The shards' leases only: status lists the plan's other
			// units' too (the post-load phase, the delivery of events).
			if k := (shardKey{l.Table, l.Shard}); strings.HasPrefix(l.Owner, holderName+"-") && slices.Contains(shards, k) {
				held[k] = l
			}
		}
		if len(held) < len(shards) || rowsDone(st) < d.o.FaultAfter || d.o.Kind == Notify && !d.holdsDelivery(st) {
			return false
		}
		for k, l := range held {
			d.owner, d.tokens[k] = l.Owner, l.Token
		}
		return true
	}, d.holder)
	if err == nil && finished != "" {
		err = fmt.Errorf("drill: the holder finished %s before the fault: the copy is too short; use a larger table, a smaller --rows or a --holder-latency", finished)
	}
	if err == nil {
		d.log.Info("the holder holds every shard", "owner", d.owner, "rows", d.o.FaultAfter)
	}
	return err
}

// waitStandbys waits until every standby logs that it waits for the
// holder's leases. Should that log line ever change, it goes on after
// standbyGrace.
func (d *drill) waitStandbys(ctx context.Context) error {
	deadline := time.Now().Add(standbyGrace)
	want, of := len(d.shards()), []string{standbyLog}
	if d.o.Kind.streams() { // the stream's standby; the copy may be done
		want, of = 1, append(of, apply.Unit(d.plan.Name).String())
	}
	for _, c := range d.standbys {
		for c.stderr.count(of...) < want {
			for _, x := range d.children() {
				if x.exited() {
					return fmt.Errorf("drill: waiting for the standbys: %w", errAborted{x})
				}
			}
			if time.Now().After(deadline) {
				d.log.Warn("no standby logged that it waits for a lease; going on", "standby", c.name, "after", standbyGrace)
				return nil
			}
			if d.o.Kind.streams() && d.streamMoved() {
				return nil // a standby holds the stream: the holder waits for it now
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	d.log.Info("the standbys are waiting", "standbys", len(d.standbys))
	return nil
}

// takeoverSeen waits until a standby has claimed the fence of every shard
// the holder held.
func (d *drill) takeoverSeen(ctx context.Context) error {
	ttl := d.plan.LeaseTTL
	what := "a takeover of every shard"
	if d.o.Kind.streams() {
		what = "a takeover of the change stream and of every shard the holder held"
	}
	err := d.w.waitFor(ctx, 5*ttl+30*time.Second, what, func(st *status.Status) bool {
		n := 0
		for _, t := range st.Tables {
			k := shardKey{t.Table, t.Shard}
			tok, ok := d.tokens[k]
			if ok && d.o.Kind.streams() && t.State == "done" && t.Token == tok {
				delete(d.tokens, k) // the holder finished it before the fault
				continue
			}
			if ok && t.Watermark > tok && label(t.Holder) != d.holder.name {
				n++
			}
		}
		return n == len(d.tokens) && (d.streamTok == 0 || d.streamTaken())
	}, d.standbys...)
	if err == nil {
		d.taken = time.Now()
		d.log.Info("takeover seen: a standby claimed every watermark the holder held")
	}
	return err
}

// inject applies the drill's fault and undoes it when the kind says so.
func (d *drill) inject(ctx context.Context) (err error) {
	if st, _ := d.w.latest(); st != nil {
		d.rep.FaultAtRows = rowsDone(st)
	}
	ttl := d.plan.LeaseTTL
	d.faultAt = time.Now()
	defer func() { d.rep.FaultMs = time.Since(d.faultAt).Milliseconds() }()
	d.log.Info("injecting the fault", "rows", d.rep.FaultAtRows)
	switch d.o.Kind {
	case StreamKill, StreamPause:
		if err = d.streamHolderNow(ctx); err != nil {
			return err
		}
		d.faultAt = time.Now()
		if st, _ := d.w.latest(); st != nil {
			d.heldShards(st)
		}
		err = d.streamFault(ctx)
	case Kill, Notify:
		if err = d.hook.slow(d.o.HolderLatency); err != nil {
			return err
		}
		err = d.holder.signal(syscall.SIGKILL)
		d.holder.wait(ctx, 10*time.Second)
		d.rep.FaultMs = 0
	case Pause, ShortPause:
		if err = d.holder.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		if d.o.Kind == Pause {
			err = d.longFault(ctx)
		} else {
			err = retry.Sleep(ctx, shortPause(ttl))
		}
		err = errors.Join(err, d.holder.signal(syscall.SIGCONT))
	case Partition:
		if err = errors.Join(d.lproxy.Cut(), d.tproxy.Cut()); err == nil {
			err = d.longFault(ctx)
		}
		err = errors.Join(err, d.lproxy.Heal(), d.tproxy.Heal())
	case LateWrite:
		if err = errors.Join(d.lproxy.Cut(), d.tproxy.Hold(10*ttl+time.Minute)); err == nil {
			err = d.longFault(ctx)
		}
		if h := d.tproxy.Holding(); err == nil && h.Chunks > 0 {
			err = retry.Sleep(ctx, ttl-time.Since(h.First)) // every byte held past the TTL
		}
		var rerr error
		d.late, rerr = d.tproxy.Release()
		d.log.Info("released the held writes", "bytes", d.late.Bytes, "held", d.late.Released.Sub(d.late.First))
		err = errors.Join(err, rerr, d.lproxy.Heal())
	case LockRestart, RedisRestart:
		d.lockSrv.Kill()
		if d.wipe {
			err = d.lockSrv.Wipe()
		}
		err = errors.Join(err, d.lockSrv.Start(ctx))
	}
	return err
}

// longFault lets a fault last until a standby has taken over, and at least
// the lease TTL.
func (d *drill) longFault(ctx context.Context) error {
	if err := d.takeoverSeen(ctx); err != nil {
		return err
	}
	return retry.Sleep(ctx, d.plan.LeaseTTL-time.Since(d.faultAt))
}

// shortPause is how long the short-pause drill stops the holder: half of
// what its lease tolerates, TTL - renew interval (TTL/3) - margin (TTL/10)
// - drift (TTL/100).
func shortPause(ttl time.Duration) time.Duration {
	return (ttl - ttl/3 - ttl/10 - ttl/100) / 2
}

// finish waits for every instance to end. A holder that lost its lease must
// stop within a few TTLs; one that keeps it, and the standbys, copy the rest
// of the plan first.
func (d *drill) finish(ctx context.Context) error {
	limit := 3*d.plan.LeaseTTL + 30*time.Second
	if d.o.Kind == ShortPause || d.o.Kind.restartsLock() && d.rep.Persistence == "on" {
		limit = 0
	}
	if !d.holder.exited() && !d.holder.wait(ctx, limit) {
		return fmt.Errorf("drill: the holder did not exit within %v after the fault; killed", limit)
	}
	d.log.Info("the holder exited", "exit", d.holder.exitCode())
	for _, c := range d.standbys {
		if !c.wait(ctx, 0) {
			return ctx.Err()
		}
		d.log.Info("a standby exited", "instance", c.name, "exit", c.exitCode())
	}
	return nil
}
