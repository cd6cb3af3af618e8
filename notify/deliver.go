package notify

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/migrate-dev/migrate/internal/faultpoint"
	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/metrics"
	"github.com/migrate-dev/migrate/outbox"
	"github.com/migrate-dev/migrate/plans"
)

// Leases is the lock service as the deliverer uses it (*lock.Locker).
type Leases interface {
	Acquire(ctx context.Context, base, owner string) (*lock.Lease, error)
	WaitFree(ctx context.Context, base, owner string) error
}

// Base names a plan's delivery lease: one instance delivers at a time,
// so that each sink receives the plan's events in order, each once but
// for a crash between the send and its mark.
func Base(plan string) string {
	u := outbox.Unit(plan)
	return lock.ShardBase(u.Plan, u.Table, u.Index)
}

// Delivery's pace.
const (
	// poll is how often pending events are looked for when nothing woke
	// the deliverer (another instance recorded them).
	poll = time.Second
	// firstBackoff and maxBackoff bound the wait between the attempts at
	// one event: a receiver down for an hour gets its events within
	// about maxBackoff of its return.
	firstBackoff = time.Second
	maxBackoff   = time.Minute
	// page is how many pending events are read at once.
	page = 100
)

// Deliverer sends a plan's pending events to its sinks, in the order they
// were recorded, and marks each delivered in the target — while it holds
// the plan's delivery lease. A crash between a send and its mark sends
// the event again, with the same id: delivery is at least once, and a
// receiver that de-duplicates by id sees each event once.
type Deliverer struct {
	plan    string
	store   *outbox.Store
	db      *sql.DB
	sinks   []target
	leases  Leases
	owner   string
	log     *slog.Logger
	metrics *metrics.Metrics

	kick chan struct{}

	mu      sync.Mutex
	holding bool           // this instance holds the delivery lease
	pending map[string]int // per sink, as last counted while holding
	settled chan struct{}  // closed and replaced whenever a count changes
}

// target is a sink and how long its events are tried.
type target struct {
	Sink
	giveUpAfter time.Duration
}

// givenUp reports whether e waited longer than the sink's give_up_after.
func (s target) givenUp(e outbox.Event) bool {
	return s.giveUpAfter > 0 && time.Since(e.At) > s.giveUpAfter
}

// Config is what a Deliverer works with.
type Config struct {
	Plan    *plans.Plan
	Store   *outbox.Store
	DB      *sql.DB // the target
	Leases  Leases
	Owner   string
	Log     *slog.Logger
	Metrics *metrics.Metrics
	// Lookup reads the environment (os.LookupEnv): the sinks' secrets.
	Lookup func(string) (string, bool)
}

// NewDeliverer is the deliverer of c.Plan's sinks; nil when it has none.
func NewDeliverer(c Config) (*Deliverer, error) {
	if len(c.Plan.Notify) == 0 {
		return nil, nil
	}
	d := &Deliverer{plan: c.Plan.Name, store: c.Store, db: c.DB, leases: c.Leases, owner: c.Owner, log: c.Log,
		metrics: c.Metrics, kick: make(chan struct{}, 1), pending: map[string]int{}, settled: make(chan struct{})}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	for _, s := range c.Plan.Notify {
		sink, err := New(s, c.Lookup)
		if err != nil {
			return nil, err
		}
		d.sinks = append(d.sinks, target{sink, s.GiveUpAfter})
	}
	return d, nil
}

// Kick wakes the deliverer: an event was recorded.
func (d *Deliverer) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run delivers while ctx lasts: it holds the plan's delivery lease, or
// waits for it as a standby while another instance holds it.
func (d *Deliverer) Run(ctx context.Context) {
	base := Base(d.plan)
	failures := 0
	for ctx.Err() == nil {
		lease, err := d.leases.Acquire(ctx, base, d.owner)
		var held *lock.HeldError
		switch {
		case errors.As(err, &held):
			d.log.Debug("run events are delivered by another instance", "holder", held.Owner)
			_ = d.leases.WaitFree(ctx, base, d.owner)
			continue
		case err != nil:
			failures++
			d.log.Warn("could not take the delivery of run events; retrying", "err", err)
			_ = retry.Sleep(ctx, retry.Delay(failures))
			continue
		}
		failures = 0
		d.log.Info("delivering run events", "token", lease.Token())
		d.setHolding(true)
		d.deliverAll(lease.Context())
		d.setHolding(false)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = lease.Release(rctx)
		cancel()
	}
}

// deliverAll runs one loop per sink until ctx (the lease's) ends.
func (d *Deliverer) deliverAll(ctx context.Context) {
	var wg sync.WaitGroup
	wakes := make([]chan struct{}, len(d.sinks))
	for i, s := range d.sinks {
		wakes[i] = make(chan struct{}, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.deliverTo(ctx, s, wakes[i])
		}()
	}
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-d.kick:
			for _, w := range wakes {
				select {
				case w <- struct{}{}:
				default:
				}
			}
		}
	}
	wg.Wait()
}

// deliverTo sends s its pending events in order until ctx ends: each
// until it is delivered (or set aside after s's give_up_after), so that a
// later event never overtakes an earlier one.
func (d *Deliverer) deliverTo(ctx context.Context, s target, wake <-chan struct{}) {
	log := d.log.With("sink", s.Name())
	attempts := 0
	for ctx.Err() == nil {
		wait, err := d.pass(ctx, s, &attempts, log)
		if err != nil && ctx.Err() == nil {
			log.Warn("could not read or mark the run events in the target; retrying", "err", err)
			wait = poll
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// pass delivers what is pending for s now, and returns how long to wait
// before the next pass: poll when nothing is left, the backoff after a
// failed attempt.
func (d *Deliverer) pass(ctx context.Context, s target, attempts *int, log *slog.Logger) (time.Duration, error) {
	rec, err := d.store.Sink(ctx, d.db, d.plan, s.Name())
	if err != nil {
		return poll, err
	}
	for {
		evs, err := d.store.Pending(ctx, d.db, d.plan, s.Name(), page)
		if err != nil {
			return poll, err
		}
		d.count(s.Name(), evs)
		if len(evs) == 0 || rec.Disabled {
			return poll, nil
		}
		for _, e := range evs {
			switch {
			case !s.Wants(e.Type):
				err = d.store.Mark(ctx, d.db, d.plan, s.Name(), e.ID, outbox.Skipped, 0)
			case s.givenUp(e):
				log.Error("a run event was not delivered within give_up_after; it is kept, not tried again: see `migrate events --pending`, then `migrate events redeliver`",
					"id", e.ID, "type", e.Type, "give_up_after", s.giveUpAfter, "attempts", *attempts)
				err = d.store.Mark(ctx, d.db, d.plan, s.Name(), e.ID, outbox.GivenUp, *attempts)
				*attempts = 0
			default:
				var wait time.Duration
				wait, err = d.send(ctx, s, e, attempts, &rec, log)
				if err == nil && wait > 0 {
					return wait, nil
				}
			}
			if err != nil {
				return poll, err
			}
		}
	}
}

// send makes one attempt at e: on success it marks e delivered; on a
// failure it records the sink's error and returns the wait before the
// next attempt (a Retry-After longer than the backoff is honoured); a 410
// disables the sink.
func (d *Deliverer) send(ctx context.Context, s target, e outbox.Event, attempts *int, rec *outbox.SinkRecord, log *slog.Logger) (time.Duration, error) {
	faultpoint.Hit("notify.before_send", e.Type)
	res := s.Send(ctx, Event{ID: e.ID, Type: e.Type, At: e.At, Body: e.Payload()})
	*attempts++
	if res.Err == nil {
		faultpoint.Hit("notify.after_send", e.Type)
		if err := d.store.Mark(ctx, d.db, d.plan, s.Name(), e.ID, outbox.Delivered, *attempts); err != nil {
			return 0, err
		}
		d.metrics.EventDelivered(s.Name())
		log.Debug("run event delivered", "id", e.ID, "type", e.Type, "attempts", *attempts)
		*attempts = 0
		if rec.LastError != "" {
			*rec = outbox.SinkRecord{}
			return 0, d.store.SetSink(ctx, d.db, d.plan, s.Name(), *rec)
		}
		return 0, nil
	}
	if ctx.Err() != nil {
		return poll, nil // the lease ended mid-send: the next holder sends it again
	}
	d.metrics.DeliveryFailed(s.Name())
	*rec = outbox.SinkRecord{LastError: res.Err.Error(), Disabled: res.Gone}
	if err := d.store.SetSink(ctx, d.db, d.plan, s.Name(), *rec); err != nil {
		return 0, err
	}
	if res.Gone {
		log.Error("the receiver answered 410 Gone: the sink is disabled until `migrate events enable`", "id", e.ID, "err", res.Err)
		return poll, nil
	}
	wait := max(retry.Backoff(*attempts, firstBackoff, maxBackoff), res.RetryAfter)
	log.Warn("could not deliver a run event; trying again", "id", e.ID, "type", e.Type, "attempt", *attempts, "backoff", wait.Round(time.Millisecond), "err", res.Err)
	return wait, nil
}

// count records what waits for sink (what the head of evs shows: the
// page's length, its oldest event's age) for metrics and Drain.
func (d *Deliverer) count(sink string, evs []outbox.Event) {
	var oldest time.Duration
	if len(evs) > 0 {
		oldest = max(time.Since(evs[0].At), 0)
	}
	d.metrics.SetOutboxBacklog(sink, int64(len(evs)), oldest)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending[sink] != len(evs) {
		d.pending[sink] = len(evs)
		close(d.settled)
		d.settled = make(chan struct{})
	}
}

func (d *Deliverer) setHolding(h bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holding = h
	if !h {
		clear(d.pending)
	}
}

// Drain waits, up to timeout, until every sink has nothing pending that
// it wants (delivered by this instance or the one holding the delivery
// lease), and returns what is left.
func (d *Deliverer) Drain(ctx context.Context, timeout time.Duration) int {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d.Kick()
	for {
		n, err := d.left(ctx)
		if err != nil {
			d.log.Warn("could not count the run events left to deliver", "err", err)
			return 0
		}
		if n == 0 {
			return 0
		}
		// Delivered by this instance, or by the holder of the delivery
		// lease — or by this one once that lease expires, when its holder
		// died.
		d.mu.Lock()
		settled := d.settled
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return n
		case <-settled:
		case <-time.After(poll):
		}
	}
}

// left counts the events some enabled sink wants and has not had.
func (d *Deliverer) left(ctx context.Context) (int, error) {
	n := 0
	for _, s := range d.sinks {
		rec, err := d.store.Sink(ctx, d.db, d.plan, s.Name())
		if err != nil || rec.Disabled {
			if ctx.Err() != nil {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			continue
		}
		evs, err := d.store.Pending(ctx, d.db, d.plan, s.Name(), page)
		if err != nil {
			if ctx.Err() != nil {
				return n, nil
			}
			return n, err
		}
		for _, e := range evs {
			if s.Wants(e.Type) && !s.givenUp(e) {
				n++
			}
		}
	}
	return n, nil
}
