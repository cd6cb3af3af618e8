package hold

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/lock"
)

// Small, deterministic fakes of hold's own interfaces (Leases, Lease,
// Fence, Work). Each records its calls in a shared trace so that tests can
// assert the order of steps across fakes.

// errUnscripted is what a fake returns when a test did not script a call.
var errUnscripted = errors.New("fake: unscripted call")

// trace is the ordered log of the fakes' calls.
type trace struct {
	mu    sync.Mutex
	steps []string
}

func (t *trace) add(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.steps = append(t.steps, fmt.Sprintf(format, args...))
}

func (t *trace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.steps, " ")
}

// fakeLease is a granted lease; lose cancels its context with cause
// lock.ErrLost, as a lock.Lease does when it can no longer be trusted.
type fakeLease struct {
	token  int64
	owner  string
	prev   lock.Holder
	wait   time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	tr     *trace

	releaseErr error // what Release returns

	mu          sync.Mutex
	released    int
	releaseLive bool // Release's context was not done
}

func (l *fakeLease) Token() int64             { return l.token }
func (l *fakeLease) Owner() string            { return l.owner }
func (l *fakeLease) Context() context.Context { return l.ctx }
func (l *fakeLease) Deadline() time.Time      { return time.Now().Add(time.Hour) }
func (l *fakeLease) Key() string              { return fmt.Sprintf("lease-%d", l.token) }
func (l *fakeLease) Previous() lock.Holder    { return l.prev }
func (l *fakeLease) Wait() time.Duration      { return l.wait }

// lose ends the lease as the lock service would: cause lock.ErrLost.
func (l *fakeLease) lose() { l.cancel(lock.ErrLost) }

func (l *fakeLease) Release(ctx context.Context) error {
	l.tr.add("release:%d", l.token)
	l.mu.Lock()
	l.released++
	l.releaseLive = ctx.Err() == nil
	l.mu.Unlock()
	l.cancel(context.Canceled) // like lock.Lease: writers stop first
	return l.releaseErr
}

func (l *fakeLease) releases() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// grant is one scripted Acquire: a lease, or an error (a *lock.HeldError
// for "held").
type grant struct {
	lease *fakeLease
	err   error
}

type waitFreeCall struct{ base, owner string }

// fakeLeases is the lock service: Acquire returns its script in order.
type fakeLeases struct {
	tr *trace

	mu       sync.Mutex
	grants   []grant
	acquires []waitFreeCall // (base, owner) of every Acquire
	raised   []int64
	raiseErr error
	waitFree []waitFreeCall
}

func (f *fakeLeases) Acquire(_ context.Context, base, owner string) (Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquires = append(f.acquires, waitFreeCall{base, owner})
	if len(f.grants) == 0 {
		f.tr.add("acquire:unscripted")
		return nil, errUnscripted
	}
	g := f.grants[0]
	f.grants = f.grants[1:]
	if g.err != nil {
		f.tr.add("acquire:err")
		return nil, g.err
	}
	f.tr.add("acquire:%d", g.lease.token)
	return g.lease, nil
}

func (f *fakeLeases) RaiseToken(_ context.Context, base string, atLeast int64) error {
	f.tr.add("raise:%d", atLeast)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.raised = append(f.raised, atLeast)
	return f.raiseErr
}

func (f *fakeLeases) WaitFree(_ context.Context, base, owner string) error {
	f.tr.add("waitfree")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waitFree = append(f.waitFree, waitFreeCall{base, owner})
	return nil
}

func (f *fakeLeases) acquired() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.acquires)
}

// claimStep is one scripted Fence.Claim: err (a *fence.StaleError, say)
// is returned without running fn; otherwise fn runs with the lease's
// context and a nil transaction, and last is returned.
type claimStep struct {
	last Watermark
	err  error
}

func stale(watermark fence.Token) claimStep {
	return claimStep{err: &fence.StaleError{Token: 1, Watermark: watermark}}
}

// fakeFence is the target's side of a unit.
type fakeFence struct {
	tr *trace

	mu            sync.Mutex
	claims        []claimStep // exhausted: fn runs, zero Watermark
	breakErr      error
	breakDeadline time.Time
	watermark     Watermark
	watermarkErr  error
	watermarks    int
}

func (f *fakeFence) Break(ctx context.Context, u fence.Shard) (int64, error) {
	f.tr.add("break")
	f.mu.Lock()
	f.breakDeadline, _ = ctx.Deadline()
	f.mu.Unlock()
	return 0, f.breakErr
}

func (f *fakeFence) Watermark(_ context.Context, u fence.Shard) (Watermark, error) {
	f.tr.add("watermark")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watermarks++
	return f.watermark, f.watermarkErr
}

func (f *fakeFence) Claim(lease Lease, u fence.Shard, fn func(context.Context, *sql.Tx, Watermark) error) (Watermark, error) {
	f.tr.add("claim:%d", lease.Token())
	f.mu.Lock()
	var step claimStep
	if len(f.claims) > 0 {
		step, f.claims = f.claims[0], f.claims[1:]
	}
	f.mu.Unlock()
	if step.err != nil {
		return Watermark{}, step.err
	}
	return step.last, fn(lease.Context(), nil, step.last)
}

func (f *fakeFence) Do(lease Lease, u fence.Shard, fn func(context.Context, *sql.Tx) error) error {
	return fn(lease.Context(), nil)
}

// resumeStep is one scripted Work.Resume.
type resumeStep struct {
	found Found
	err   error
}

// fakeWork is a unit: Look, Resume and Run return their scripts in
// order; exhausted, Look and Resume find it running and Run succeeds.
type fakeWork struct {
	tr *trace

	mu      sync.Mutex
	looks   []Found
	resumes []resumeStep
	runs    []func(context.Context, *Claim) error
	halted  error
	claims  []*Claim // what Run was given
	nLook   int
	nResume int
}

func (w *fakeWork) Look(context.Context) (Found, error) {
	w.tr.add("look")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nLook++
	if len(w.looks) == 0 {
		return Found{State: cursor.Running}, nil
	}
	f := w.looks[0]
	w.looks = w.looks[1:]
	return f, nil
}

func (w *fakeWork) Resume(_ context.Context, tx *sql.Tx, lease Lease) (Found, error) {
	w.tr.add("resume:%d", lease.Token())
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nResume++
	if len(w.resumes) == 0 {
		return Found{State: cursor.Running}, nil
	}
	r := w.resumes[0]
	w.resumes = w.resumes[1:]
	return r.found, r.err
}

func (w *fakeWork) Run(ctx context.Context, c *Claim) error {
	w.tr.add("run:%d", c.Lease.Token())
	w.mu.Lock()
	w.claims = append(w.claims, c)
	var run func(context.Context, *Claim) error
	if len(w.runs) > 0 {
		run, w.runs = w.runs[0], w.runs[1:]
	}
	w.mu.Unlock()
	if run == nil {
		return nil
	}
	return run(ctx, c)
}

func (w *fakeWork) Halted() error { return w.halted }

func (w *fakeWork) ran() []*Claim {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*Claim(nil), w.claims...)
}

// guardedWork is a Work whose claim runs inside a guard of its own.
type guardedWork struct {
	*fakeWork
	guardErr error // returned instead of running the claim
	leases   []Lease
}

func (g *guardedWork) Guard(lease Lease, claim func() error) error {
	g.tr.add("guard:%d", lease.Token())
	g.mu.Lock()
	g.leases = append(g.leases, lease)
	g.mu.Unlock()
	if g.guardErr != nil {
		return g.guardErr
	}
	err := claim()
	g.tr.add("unguard")
	return err
}

// events records what the loop emitted.
type events struct {
	mu   sync.Mutex
	list []Event
	hook func(Event) // called after recording, from the loop
}

func (e *events) observe(ev Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	hook := e.hook
	e.mu.Unlock()
	if hook != nil {
		hook(ev)
	}
}

func (e *events) get() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.list...)
}

// The unit and owner of every test.
var (
	unit  = fence.Shard{Plan: "p", Table: "t", Index: 3}
	owner = "me"
)

// rig wires a Loop to the fakes.
type rig struct {
	tr     *trace
	leases *fakeLeases
	fence  *fakeFence
	work   *fakeWork
	events *events
	loop   *Loop
}

func newRig(maxRetries int) *rig {
	tr := &trace{}
	r := &rig{
		tr:     tr,
		leases: &fakeLeases{tr: tr},
		fence:  &fakeFence{tr: tr},
		work:   &fakeWork{tr: tr, halted: fmt.Errorf("%w: %s is halted", ErrHalted, unit)},
		events: &events{},
	}
	r.loop = &Loop{Leases: r.leases, Fence: r.fence, Owner: owner, MaxRetries: maxRetries, Observe: r.events.observe}
	return r
}

// lease makes a lease of r's trace granted to owner with token.
func (r *rig) lease(token int64) *fakeLease {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &fakeLease{token: token, owner: owner, ctx: ctx, cancel: cancel, tr: r.tr}
}

// grant scripts the next Acquires to return these leases.
func (r *rig) grant(leases ...*fakeLease) {
	for _, l := range leases {
		r.leases.grants = append(r.leases.grants, grant{lease: l})
	}
}

func (r *rig) refuse(err error) { r.leases.grants = append(r.leases.grants, grant{err: err}) }

func (r *rig) run(ctx context.Context) error { return r.loop.Run(ctx, unit, r.work) }

// start runs r's loop in the background. A test that backs off (a
// retry.Delay of 250–750ms) starts it before t.Parallel, so that every
// backoff of the package sleeps at once, whatever -parallel is.
func (r *rig) start(ctx context.Context) <-chan error {
	res := make(chan error, 1)
	go func() { res <- r.run(ctx) }()
	return res
}

// runWork runs w, whose fakeWork must be r.work.
func (r *rig) runWork(ctx context.Context, w Work) error { return r.loop.Run(ctx, unit, w) }

// wantEvents fails t unless the loop emitted exactly want, in order.
func (r *rig) wantEvents(t *testing.T, want ...Event) {
	t.Helper()
	got := r.events.get()
	if len(got) != len(want) {
		t.Fatalf("events = %s\nwant     %s", eventsString(got), eventsString(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("event %d = %+v, want %+v\nall: %s", i, got[i], want[i], eventsString(got))
		}
	}
}

// wantTrace fails t unless the fakes were called in exactly this order.
func (r *rig) wantTrace(t *testing.T, want string) {
	t.Helper()
	if got := r.tr.String(); got != want {
		t.Fatalf("trace = %s\nwant    %s", got, want)
	}
}

func eventsString(evs []Event) string {
	var parts []string
	for _, e := range evs {
		parts = append(parts, fmt.Sprintf("%v(token %d)", e.Kind, e.Token))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// The events a claim of token emits.
func claimed(token int64) Event { return Event{Kind: Claimed, Unit: unit, Token: token} }
func done(token int64) Event    { return Event{Kind: Done, Unit: unit, Token: token} }
