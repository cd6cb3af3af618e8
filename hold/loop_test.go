package hold

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/lock"
)

// Tests that back off wait retry.Delay(1), 250–750ms: every test runs in
// parallel so that the package takes about one backoff.

func TestDecide(t *testing.T) {
	t.Parallel()
	other := errors.New("checkpoint table missing")
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	lockWait := &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}
	pgLockWait := &pgconn.PgError{Code: "55P03", Message: "canceling statement due to lock timeout"}
	lost := fmt.Errorf("%w: %w", ErrFenced, errLeaseLost{lock.ErrLost, 3})
	cases := []struct {
		name string
		err  error
		next next
		kind retry.Kind
	}{
		{"done", nil, nextDone, retry.Final},
		{"held by another instance", &lock.HeldError{Owner: "b", Token: 7}, nextStandby, retry.Final},
		{"held, wrapped", fmt.Errorf("acquire: %w", &lock.HeldError{Owner: "b"}), nextStandby, retry.Final},
		{"failed before writing", Again(other), nextBackoff, retry.Failure},
		{"any other error before writing", other, nextBackoff, retry.Failure},
		{"a database unavailable", Again(reset), nextBackoff, retry.Outage},
		{"a database unavailable, bare", reset, nextBackoff, retry.Outage},
		{"the lock service unavailable", lock.Unavailable(errors.New("no leader")), nextBackoff, retry.Outage},
		{"the claim waits for the old holder's transaction (MySQL)", Again(lockWait), nextBackoff, retry.Outage},
		{"a MySQL lock wait, bare", lockWait, nextBackoff, retry.Outage},
		{"a PostgreSQL lock timeout", pgLockWait, nextBackoff, retry.Outage},
		{"token still not above the watermark", errReclaim{watermark: 9}, nextBackoff, retry.Failure},
		{"token not above the watermark, wrapped", fmt.Errorf("claim: %w", errReclaim{watermark: 9}), nextBackoff, retry.Failure},
		{"the target lost committed batches", Again(errors.New("cursor moved")), nextBackoff, retry.Failure},
		{"halted", fmt.Errorf("%w: %w", ErrHalted, errors.New("bad rows")), nextStop, retry.Final},
		{"halted beats an outage it wraps", fmt.Errorf("%w: %w", ErrHalted, reset), nextStop, retry.Final},
		{"fenced by a newer token", fmt.Errorf("%w: %w", ErrFenced, &fence.StaleError{Token: 3, Watermark: 4}), nextStop, retry.Final},
		{"fenced: lease lost", lost, nextStop, retry.Final},
		{"fenced while the target is unreachable", fmt.Errorf("%w: %w", ErrFenced, reset), nextStop, retry.Final},
		{"lease lost to the lock service, taken again", errRetry{lost}, nextBackoff, retry.Failure},
		{"a cancellation that is not this run's", context.Canceled, nextBackoff, retry.Failure},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, k := decide(context.Background(), c.err)
			if n != c.next || k != c.kind {
				t.Errorf("decide(%v) = %v/%v, want %v/%v", c.err, n, k, c.next, c.kind)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range []error{Again(reset), other, &lock.HeldError{Owner: "b"}, errReclaim{1}} {
		if n, k := decide(ctx, err); n != nextStop || k != retry.Final {
			t.Errorf("a cancelled run, %v: %v/%v, want stop/final", err, n, k)
		}
	}
	if n, _ := decide(ctx, nil); n != nextDone {
		t.Errorf("done as the run is cancelled: %v, want done", n)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	for k, want := range map[Kind]string{Standby: "standby", Claimed: "claimed", Done: "done", Halted: "halted", Fenced: "fenced", RecoveryFailed: "recovery-failed"} {
		if k.String() != want {
			t.Errorf("Kind(%d) = %q, want %q", k, k.String(), want)
		}
	}
	for n, want := range map[next]string{nextDone: "done", nextStop: "stop", nextStandby: "standby", nextBackoff: "backoff"} {
		if n.String() != want {
			t.Errorf("next(%d) = %q, want %q", n, n.String(), want)
		}
	}
	if got, want := Base(unit), lock.ShardBase("p", "t", 3); got != want {
		t.Errorf("Base = %q, want %q", got, want)
	}
	if e := errors.New("x"); !errors.Is(Again(e), e) || Again(e).Error() != "x" {
		t.Errorf("Again does not wrap its error")
	}
	if got := (errReclaim{watermark: 12}).Error(); !strings.Contains(got, "12") {
		t.Errorf("errReclaim: %q does not name the watermark", got)
	}
}

func TestRun_HeldStandbyThenAcquired(t *testing.T) {
	t.Parallel()
	r := newRig(0)
	r.refuse(fmt.Errorf("acquire: %w", &lock.HeldError{Key: Base(unit), Owner: "other", Token: 7}))
	l := r.lease(10)
	r.grant(l)
	if err := r.run(context.Background()); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	r.wantEvents(t, Event{Kind: Standby, Unit: unit, Owner: "other", Token: 7}, claimed(10), done(10))
	r.wantTrace(t, "look acquire:err waitfree look acquire:10 break claim:10 resume:10 run:10 release:10")
	if want := []waitFreeCall{{Base(unit), owner}}; len(r.leases.waitFree) != 1 || r.leases.waitFree[0] != want[0] {
		t.Errorf("WaitFree calls = %v, want %v", r.leases.waitFree, want)
	}
	for _, a := range r.leases.acquires {
		if a != (waitFreeCall{Base(unit), owner}) {
			t.Errorf("Acquire(%q, %q), want the unit's base and the loop's owner", a.base, a.owner)
		}
	}
	if l.releases() != 1 {
		t.Errorf("lease released %d times, want 1", l.releases())
	}
}

func TestRun_StandbyWaitsForAFreeSlot(t *testing.T) {
	t.Parallel()
	r := newRig(0)
	r.loop.Slots = make(chan struct{}, 1)
	r.refuse(&lock.HeldError{Owner: "other", Token: 7})
	r.grant(r.lease(10))
	standby := make(chan struct{})
	r.events.hook = func(e Event) {
		if e.Kind == Standby {
			r.loop.Slots <- struct{}{} // every slot busy: the standby must wait
			close(standby)
		}
	}
	res := make(chan error, 1)
	go func() { res <- r.run(context.Background()) }()
	<-standby
	r.leases.mu.Lock()
	waited := len(r.leases.waitFree)
	r.leases.mu.Unlock()
	if waited != 0 {
		t.Fatalf("WaitFree called while every slot was busy")
	}
	<-r.loop.Slots
	if err := <-res; err != nil {
		t.Fatalf("Run = %v", err)
	}
	r.wantTrace(t, "look acquire:err waitfree look acquire:10 break claim:10 resume:10 run:10 release:10")
}

func TestRun_StaleClaimRaisesAndAcquiresAgain(t *testing.T) {
	t.Parallel()
	r := newRig(0)
	l1, l2 := r.lease(2), r.lease(9)
	r.grant(l1, l2)
	r.fence.claims = []claimStep{stale(8)}
	if err := r.run(context.Background()); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	// The refused lease is given back before the tokens are raised and
	// the unit acquired again; the stale claim never ran Resume.
	r.wantTrace(t, "look acquire:2 break claim:2 release:2 raise:8 acquire:9 break claim:9 resume:9 run:9 release:9")
	if len(r.leases.raised) != 1 || r.leases.raised[0] != 8 {
		t.Errorf("RaiseToken calls = %v, want [8]", r.leases.raised)
	}
	if l1.releases() != 1 || l2.releases() != 1 {
		t.Errorf("releases: first lease %d, second %d; want 1 each", l1.releases(), l2.releases())
	}
	r.wantEvents(t, claimed(9), done(9))
	if c := r.work.ran(); len(c) != 1 || c[0].Lease != Lease(l2) {
		t.Errorf("Run got %v, want one claim of the second lease", c)
	}
}

func TestRun_StaleThreeTimesGivesUp(t *testing.T) {
	t.Parallel()
	r := newRig(0)
	ls := []*fakeLease{r.lease(1), r.lease(2), r.lease(3)}
	r.grant(ls...)
	r.fence.claims = []claimStep{stale(5), stale(6), stale(7)}
	err := r.run(context.Background())
	// After maxReclaims acquisitions the claim gives up: Fenced returns the
	// errReclaim as is (not ErrFenced), and decide backs off with a
	// Failure, which MaxRetries 0 does not allow.
	var rc errReclaim
	if !errors.As(err, &rc) || rc.watermark != 7 {
		t.Fatalf("Run = %v, want the last errReclaim (watermark 7)", err)
	}
	if errors.Is(err, ErrFenced) {
		t.Errorf("Run = %v: fenced, want a spent retry budget", err)
	}
	if !strings.Contains(err.Error(), "p/t#3: gave up after 1 attempts") {
		t.Errorf("Run = %v, want gave up after 1 attempts", err)
	}
	r.wantTrace(t, "look acquire:1 break claim:1 release:1 raise:5 acquire:2 break claim:2 release:2 raise:6 acquire:3 break claim:3 release:3")
	if len(r.leases.raised) != maxReclaims-1 {
		t.Errorf("RaiseToken called %d times, want %d", len(r.leases.raised), maxReclaims-1)
	}
	for _, l := range ls {
		if l.releases() != 1 {
			t.Errorf("lease %d released %d times, want 1", l.token, l.releases())
		}
	}
	r.wantEvents(t) // no claim, no fenced event
}

func TestRun_RaiseTokenFails(t *testing.T) {
	t.Parallel()
	r := newRig(0)
	r.grant(r.lease(1))
	r.fence.claims = []claimStep{stale(5)}
	r.leases.raiseErr = errors.New("raise refused")
	err := r.run(context.Background())
	if err == nil || !errors.Is(err, r.leases.raiseErr) || !strings.Contains(err.Error(), "gave up after 1 attempts") {
		t.Fatalf("Run = %v, want the raise's error, given up", err)
	}
	r.wantTrace(t, "look acquire:1 break claim:1 release:1 raise:5")
	r.wantEvents(t)
}

// loseAndFail is a Run that loses its lease to the lock service and fails.
func loseAndFail(l *fakeLease) func(context.Context, *Claim) error {
	return func(context.Context, *Claim) error {
		l.lose()
		return errors.New("batch: the lease ended")
	}
}

func TestRun_LeaseLostWithNoSuccessorIsTakenAgain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		wm    Watermark
		wmErr error
	}{
		{"watermark at the lost token", Watermark{Token: 5, Owner: owner}, nil},
		{"watermark below the lost token", Watermark{Token: 4, Owner: "old"}, nil},
		{"target unreachable", Watermark{}, fmt.Errorf("dial: %w", syscall.ECONNREFUSED)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(1)
			l1, l2 := r.lease(5), r.lease(6)
			r.grant(l1, l2)
			r.fence.watermark, r.fence.watermarkErr = c.wm, c.wmErr
			r.work.runs = append(r.work.runs, loseAndFail(l1))
			res := r.start(context.Background())
			t.Parallel()
			if err := <-res; err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			r.wantEvents(t, claimed(5), Event{Kind: Fenced, Unit: unit, Token: 5}, claimed(6), done(6))
			r.wantTrace(t, "look acquire:5 break claim:5 resume:5 run:5 release:5 watermark look acquire:6 break claim:6 resume:6 run:6 release:6")
		})
	}
}

func TestRun_LeaseLostToASuccessorIsFenced(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		wm    Watermark
		wmErr error
	}{
		{"watermark above the lost token", Watermark{Token: 6, Owner: "successor"}, nil},
		{"watermark unreadable", Watermark{}, errors.New("permission denied")},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(3)
			l := r.lease(5)
			r.grant(l)
			r.fence.watermark, r.fence.watermarkErr = c.wm, c.wmErr
			r.work.runs = append(r.work.runs, loseAndFail(l))
			err := r.run(context.Background())
			var ll errLeaseLost
			if !errors.Is(err, ErrFenced) || !errors.As(err, &ll) || ll.token != 5 {
				t.Fatalf("Run = %v, want ErrFenced with the lost lease's token", err)
			}
			if errors.Is(err, fence.ErrStale) {
				t.Errorf("Run = %v: stale, want a lost lease", err)
			}
			r.wantEvents(t, claimed(5), Event{Kind: Fenced, Unit: unit, Token: 5})
			r.wantTrace(t, "look acquire:5 break claim:5 resume:5 run:5 release:5 watermark")
		})
	}
}

func TestRun_LeaseLostThenFoundDoneByAnother(t *testing.T) {
	r := newRig(1)
	l := r.lease(5)
	r.grant(l)
	r.fence.watermark = Watermark{Token: 5, Owner: owner}
	r.work.looks = []Found{{State: cursor.Running}, {State: cursor.Done, Token: 8}}
	r.work.runs = append(r.work.runs, loseAndFail(l))
	res := r.start(context.Background())
	t.Parallel()
	err := <-res
	// superseded: exit 4, not a success
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("Run = %v, want ErrFenced", err)
	}
	r.wantEvents(t, claimed(5), Event{Kind: Fenced, Unit: unit, Token: 5}, Event{Kind: Done, Unit: unit, ByOther: true, Token: 8})
	r.wantTrace(t, "look acquire:5 break claim:5 resume:5 run:5 release:5 watermark look")
}

func TestRun_BudgetSpent(t *testing.T) {
	t.Parallel()
	t.Run("run keeps failing", func(t *testing.T) {
		r := newRig(1)
		l1, l2 := r.lease(1), r.lease(2)
		r.grant(l1, l2)
		boom := errors.New("boom")
		fail := func(context.Context, *Claim) error { return boom }
		r.work.runs = append(r.work.runs, fail, fail)
		res := r.start(context.Background())
		t.Parallel()
		err := <-res
		if !errors.Is(err, boom) || err.Error() != "p/t#3: gave up after 2 attempts: boom" {
			t.Fatalf("Run = %v, want gave up after 2 attempts: boom", err)
		}
		if n := len(r.work.ran()); n != 2 {
			t.Errorf("Run called %d times, want 2", n)
		}
		if l1.releases() != 1 || l2.releases() != 1 {
			t.Errorf("leases released %d, %d times; want 1 each", l1.releases(), l2.releases())
		}
		r.wantEvents(t, claimed(1), claimed(2))
	})
	t.Run("acquire keeps failing", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		r.refuse(errors.New("lock service: bad reply"))
		err := r.run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "gave up after 1 attempts: lock service: bad reply") {
			t.Fatalf("Run = %v, want gave up after 1 attempts", err)
		}
		if r.leases.acquired() != 1 {
			t.Errorf("Acquire called %d times, want 1", r.leases.acquired())
		}
		r.wantEvents(t)
	})
	t.Run("an outage is not a failure, but bounded", func(t *testing.T) {
		r := newRig(0) // an outage is not counted against max_retries...
		r.loop.MaxOutage = 100 * time.Millisecond
		down := lock.Unavailable(errors.New("no leader"))
		r.refuse(down)
		r.refuse(down)
		res := r.start(context.Background())
		t.Parallel()
		err := <-res
		// ... but lasts at most max_outage: the second failure comes
		// after a backoff of at least 250ms.
		if !errors.Is(err, lock.ErrUnavailable) || !strings.Contains(err.Error(), "p/t#3: unavailable for") {
			t.Fatalf("Run = %v, want unavailable for ... (max_outage)", err)
		}
		if r.leases.acquired() != 2 {
			t.Errorf("Acquire called %d times, want 2", r.leases.acquired())
		}
	})
}

func TestRun_Outcomes(t *testing.T) {
	t.Parallel()
	t.Run("found done before the claim", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		r.work.looks = []Found{{State: cursor.Done, Token: 9}}
		if err := r.run(context.Background()); err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		r.wantEvents(t, Event{Kind: Done, Unit: unit, ByOther: true, Token: 9})
		r.wantTrace(t, "look")
	})
	t.Run("found halted before the claim", func(t *testing.T) {
		t.Parallel()
		r := newRig(3)
		r.work.looks = []Found{{State: cursor.Halted, Token: 9}}
		if err := r.run(context.Background()); err != r.work.halted {
			t.Fatalf("Run = %v, want the work's Halted error", err)
		}
		r.wantEvents(t, Event{Kind: Halted, Unit: unit, ByOther: true, Token: 9})
		r.wantTrace(t, "look")
	})
	t.Run("found done by the claim", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		l := r.lease(4)
		r.grant(l)
		r.work.resumes = []resumeStep{{found: Found{State: cursor.Done, Token: 3}}}
		if err := r.run(context.Background()); err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		r.wantEvents(t, Event{Kind: Done, Unit: unit, ByOther: true, Token: 3})
		r.wantTrace(t, "look acquire:4 break claim:4 resume:4 release:4")
	})
	t.Run("found halted by the claim", func(t *testing.T) {
		t.Parallel()
		r := newRig(3)
		r.grant(r.lease(4))
		r.work.resumes = []resumeStep{{found: Found{State: cursor.Halted, Token: 3}}}
		if err := r.run(context.Background()); !errors.Is(err, ErrHalted) {
			t.Fatalf("Run = %v, want ErrHalted", err)
		}
		r.wantEvents(t, Event{Kind: Halted, Unit: unit, ByOther: true, Token: 3})
		r.wantTrace(t, "look acquire:4 break claim:4 resume:4 release:4")
	})
	t.Run("run halts", func(t *testing.T) {
		t.Parallel()
		r := newRig(3)
		r.grant(r.lease(4))
		halt := fmt.Errorf("%w: rows the target refuses", ErrHalted)
		r.work.runs = append(r.work.runs, func(context.Context, *Claim) error { return halt })
		if err := r.run(context.Background()); err != halt {
			t.Fatalf("Run = %v, want %v", err, halt)
		}
		r.wantEvents(t, claimed(4), Event{Kind: Halted, Unit: unit, Token: 4})
		r.wantTrace(t, "look acquire:4 break claim:4 resume:4 run:4 release:4")
	})
	t.Run("run refused a stale token", func(t *testing.T) {
		t.Parallel()
		r := newRig(3)
		r.grant(r.lease(4))
		r.work.runs = append(r.work.runs, func(context.Context, *Claim) error {
			return fmt.Errorf("batch: %w", &fence.StaleError{Shard: unit, Token: 4, Watermark: 5})
		})
		err := r.run(context.Background())
		if !errors.Is(err, ErrFenced) || !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Run = %v, want ErrFenced wrapping the stale error", err)
		}
		r.wantEvents(t, claimed(4), Event{Kind: Fenced, Unit: unit, Token: 4, Stale: true})
		// no watermark check, no second acquire
		r.wantTrace(t, "look acquire:4 break claim:4 resume:4 run:4 release:4")
	})
	t.Run("run asks to take the unit again", func(t *testing.T) {
		r := newRig(1)
		r.grant(r.lease(4), r.lease(5))
		r.work.runs = append(r.work.runs, func(context.Context, *Claim) error { return Again(errors.New("cursor moved")) })
		res := r.start(context.Background())
		t.Parallel()
		if err := <-res; err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		r.wantEvents(t, claimed(4), claimed(5), done(5))
		r.wantTrace(t, "look acquire:4 break claim:4 resume:4 run:4 release:4 look acquire:5 break claim:5 resume:5 run:5 release:5")
	})
	t.Run("Again after the lease was lost is fenced", func(t *testing.T) {
		// finish fences an Again whose lease ended (the Work's check and
		// the loss raced); the loop must then stop, not take the unit
		// again from a successor. MaxRetries 0: a backoff gives up at once.
		t.Parallel()
		r := newRig(0)
		l := r.lease(4)
		r.grant(l)
		r.fence.watermark = Watermark{Token: 5, Owner: "successor"}
		r.work.runs = append(r.work.runs, func(context.Context, *Claim) error {
			l.lose()
			return Again(errors.New("cursor moved"))
		})
		err := r.run(context.Background())
		if !errors.Is(err, ErrFenced) || strings.Contains(err.Error(), "gave up") {
			t.Fatalf("Run = %v, want ErrFenced, no backoff", err)
		}
		r.wantEvents(t, claimed(4), Event{Kind: Fenced, Unit: unit, Token: 4})
		r.wantTrace(t, "look acquire:4 break claim:4 resume:4 run:4 release:4 watermark")
	})
	t.Run("a cancelled run", func(t *testing.T) {
		t.Parallel()
		r := newRig(3)
		l := r.lease(4)
		r.grant(l)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r.work.runs = append(r.work.runs, func(ctx context.Context, c *Claim) error {
			cancel()
			return fmt.Errorf("copy: %w", ctx.Err())
		})
		if err := r.run(ctx); err != context.Canceled {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		r.wantEvents(t, claimed(4))
		// the lease is still given back, with a context of its own
		if l.releases() != 1 || !l.releaseLive {
			t.Errorf("lease released %d times (live context %v), want once with a live context", l.releases(), l.releaseLive)
		}
	})
	t.Run("a cancelled run whose lease ended too is not fenced", func(t *testing.T) {
		t.Parallel()
		r := newRig(3)
		l := r.lease(4)
		r.grant(l)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r.work.runs = append(r.work.runs, func(ctx context.Context, c *Claim) error {
			cancel()
			l.lose()
			return fmt.Errorf("copy: %w", ctx.Err())
		})
		if err := r.run(ctx); err != context.Canceled {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		r.wantEvents(t, claimed(4))
		r.wantTrace(t, "look acquire:4 break claim:4 resume:4 run:4 release:4")
	})
}

func TestRun_Takeover(t *testing.T) {
	t.Parallel()
	old := lock.Holder{Owner: "old", Token: 4, RenewedAt: time.Unix(1e9, 0)}
	t.Run("from a live holder", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		l := r.lease(5)
		l.prev, l.wait = old, 3*time.Second
		r.grant(l)
		if err := r.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		c := r.work.ran()[0]
		if !c.TakenOver() || c.Previous != old || c.Wait != 3*time.Second {
			t.Errorf("claim: taken over %v from %+v after %v, want from %+v after 3s", c.TakenOver(), c.Previous, c.Wait, old)
		}
		r.wantEvents(t, Event{Kind: Claimed, Unit: unit, Token: 5, Previous: old}, done(5))
	})
	t.Run("after a clean release", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		l := r.lease(5)
		l.prev = old
		l.prev.Released = true
		r.grant(l)
		if err := r.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c := r.work.ran()[0]; c.TakenOver() || c.Previous != (lock.Holder{}) {
			t.Errorf("claim after a release: taken over from %+v", c.Previous)
		}
		r.wantEvents(t, claimed(5), done(5))
	})
	t.Run("the lock service forgot; the fence remembers", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		r.grant(r.lease(5))
		last := Watermark{Token: 4, Owner: "old"}
		r.fence.claims = []claimStep{{last: last}}
		r.work.resumes = []resumeStep{{found: Found{State: cursor.Running, UpdatedAt: time.Now().Add(-time.Minute)}}}
		start := time.Now()
		if err := r.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		c := r.work.ran()[0]
		want := lock.Holder{Owner: "old", Token: 4}
		if !c.TakenOver() || c.Previous != want || c.Last != last {
			t.Errorf("claim: previous %+v, last %+v; want %+v, %+v", c.Previous, c.Last, want, last)
		}
		if c.Wait < time.Minute || c.Wait > time.Hour {
			t.Errorf("claim waited %v, want about a minute (since the last commit)", c.Wait)
		}
		if c.Acquired.IsZero() || c.Elect <= 0 || c.Elect > time.Since(start) || c.Took < 0 {
			t.Errorf("claim times: acquired %v, elect %v, took %v", c.Acquired, c.Elect, c.Took)
		}
		r.wantEvents(t, Event{Kind: Claimed, Unit: unit, Token: 5, Previous: want}, done(5))
	})
}

func TestPreviousHolder(t *testing.T) {
	t.Parallel()
	now := time.Now()
	live := lock.Holder{Owner: "old", Token: 4}
	running := Found{State: cursor.Running, UpdatedAt: now.Add(-time.Minute)}
	other := Watermark{Token: 3, Owner: "fenced"}
	cases := []struct {
		name     string
		prev     lock.Holder
		wait     time.Duration
		found    Found
		last     Watermark
		want     lock.Holder
		minWait  time.Duration
		maxWaitD time.Duration
	}{
		{"first claim", lock.Holder{}, 0, Found{State: cursor.Pending}, Watermark{}, lock.Holder{}, 0, 0},
		{"the lease's record", live, 2 * time.Second, running, other, live, 2 * time.Second, 2 * time.Second},
		{"a clean release", lock.Holder{Owner: "old", Token: 4, Released: true}, time.Second, running, Watermark{Token: 4, Owner: "old"}, lock.Holder{}, time.Second, time.Second},
		{"the fence's holder of a running unit", lock.Holder{}, 0, running, other, lock.Holder{Owner: "fenced", Token: 3}, time.Minute, time.Hour},
		{"the lease's record names this owner", lock.Holder{Owner: owner, Token: 2}, 0, running, other, lock.Holder{Owner: "fenced", Token: 3}, time.Minute, time.Hour},
		{"the fence names this owner", lock.Holder{}, 0, running, Watermark{Token: 3, Owner: owner}, lock.Holder{}, 0, 0},
		{"the fence's holder of a pending unit", lock.Holder{}, 0, Found{State: cursor.Pending}, other, lock.Holder{}, 0, 0},
		{"a last commit in the future", lock.Holder{}, 0, Found{State: cursor.Running, UpdatedAt: now.Add(time.Hour)}, other, lock.Holder{Owner: "fenced", Token: 3}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(0)
			l := r.lease(5)
			l.prev, l.wait = c.prev, c.wait
			got, wait := previousHolder(l, c.found, c.last)
			if got != c.want || wait < c.minWait || wait > c.maxWaitD {
				t.Errorf("previousHolder = %+v after %v, want %+v after [%v, %v]", got, wait, c.want, c.minWait, c.maxWaitD)
			}
		})
	}
}

func TestRun_GuardedClaim(t *testing.T) {
	t.Parallel()
	t.Run("the claim runs inside the guard", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		l := r.lease(6)
		r.grant(l)
		w := &guardedWork{fakeWork: r.work}
		if err := r.runWork(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		r.wantTrace(t, "look acquire:6 break guard:6 claim:6 resume:6 unguard run:6 release:6")
		if len(w.leases) != 1 || w.leases[0] != Lease(l) {
			t.Errorf("Guard got %v, want the claim's lease", w.leases)
		}
		r.wantEvents(t, claimed(6), done(6))
	})
	t.Run("a guard that fails claims nothing", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		l := r.lease(6)
		r.grant(l)
		w := &guardedWork{fakeWork: r.work, guardErr: errors.New("setup lock busy")}
		err := r.runWork(context.Background(), w)
		if !errors.Is(err, w.guardErr) || !strings.Contains(err.Error(), "gave up after 1 attempts") {
			t.Fatalf("Run = %v, want the guard's error, given up", err)
		}
		r.wantTrace(t, "look acquire:6 break guard:6 release:6")
		r.wantEvents(t)
	})
}

func TestRun_Slots(t *testing.T) {
	t.Parallel()
	r := newRig(0)
	r.loop.Slots = make(chan struct{}, 1)
	r.loop.Slots <- struct{}{} // the test holds the only slot
	r.grant(r.lease(7))
	looked := make(chan struct{})
	r.work.runs = append(r.work.runs, func(context.Context, *Claim) error {
		if n := len(r.loop.Slots); n != 1 {
			t.Errorf("Run holds %d slots, want 1", n)
		}
		return nil
	})
	w := &lookHook{fakeWork: r.work, looked: func() { close(looked) }} // one look: the slot is freed only after it
	res := make(chan error, 1)
	go func() { res <- r.runWork(context.Background(), w) }()
	<-looked
	// Look is done outside any slot; the claim waits for one.
	if n := r.leases.acquired(); n != 0 {
		t.Fatalf("Acquire called %d times while every slot was busy", n)
	}
	select {
	case err := <-res:
		t.Fatalf("Run returned %v while every slot was busy", err)
	default:
	}
	<-r.loop.Slots
	if err := <-res; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if n := len(r.loop.Slots); n != 0 {
		t.Errorf("%d slots still taken after Run", n)
	}
	r.wantTrace(t, "look acquire:7 break claim:7 resume:7 run:7 release:7")
}

func TestRun_SlotWaitCancelled(t *testing.T) {
	t.Parallel()
	r := newRig(3)
	r.loop.Slots = make(chan struct{}, 1)
	r.loop.Slots <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.run(ctx); err != context.Canceled {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if r.leases.acquired() != 0 {
		t.Errorf("acquired without a slot")
	}
}

// lookHook tells the test when Look returned.
type lookHook struct {
	*fakeWork
	looked func()
}

func (w *lookHook) Look(ctx context.Context) (Found, error) {
	defer w.looked()
	return w.fakeWork.Look(ctx)
}

func TestRun_ClaimFailed(t *testing.T) {
	t.Parallel()
	live := lock.Holder{Owner: "old", Token: 4}
	unreadable := errors.New("checkpoint unreadable")
	t.Run("a takeover whose recovery failed is retried", func(t *testing.T) {
		r := newRig(1)
		l1, l2 := r.lease(5), r.lease(6)
		l1.prev = live
		r.grant(l1, l2)
		r.work.resumes = []resumeStep{{err: unreadable}}
		res := r.start(context.Background())
		t.Parallel()
		if err := <-res; err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		r.wantEvents(t, Event{Kind: RecoveryFailed, Unit: unit, Token: 5}, claimed(6), done(6))
		r.wantTrace(t, "look acquire:5 break claim:5 resume:5 release:5 look acquire:6 break claim:6 resume:6 run:6 release:6")
	})
	t.Run("a claim after a release that failed is no failed recovery", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		l := r.lease(5)
		l.prev = live
		l.prev.Released = true
		r.grant(l)
		r.work.resumes = []resumeStep{{err: unreadable}}
		err := r.run(context.Background())
		if !errors.Is(err, unreadable) || err.Error() != "p/t#3: gave up after 1 attempts: takeover of p/t#3: checkpoint unreadable" {
			t.Fatalf("Run = %v", err)
		}
		r.wantEvents(t)
		if l.releases() != 1 {
			t.Errorf("lease released %d times, want 1", l.releases())
		}
	})
	t.Run("a claim that lost its lease is fenced", func(t *testing.T) {
		t.Parallel()
		r := newRig(0)
		l := r.lease(5)
		l.prev = live
		r.grant(l)
		r.fence.watermark = Watermark{Token: 6, Owner: "successor"}
		r.work.resumes = []resumeStep{{err: unreadable}}
		w := &resumeHook{fakeWork: r.work, before: l.lose}
		err := r.runWork(context.Background(), w)
		if !errors.Is(err, ErrFenced) || !errors.Is(err, unreadable) {
			t.Fatalf("Run = %v, want ErrFenced", err)
		}
		r.wantEvents(t, Event{Kind: Fenced, Unit: unit, Token: 5})
		r.wantTrace(t, "look acquire:5 break claim:5 resume:5 release:5 watermark")
	})
}

// resumeHook calls before ahead of the claim's Resume.
type resumeHook struct {
	*fakeWork
	before func()
}

func (w *resumeHook) Resume(ctx context.Context, tx *sql.Tx, lease Lease) (Found, error) {
	w.before()
	return w.fakeWork.Resume(ctx, tx, lease)
}
