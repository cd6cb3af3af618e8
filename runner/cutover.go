package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/stream"
	"github.com/migrate-dev/migrate/stream/apply"
)

// ErrLagging: a cutover found the stream further behind than --max-lag,
// or not caught up within --timeout; nothing was changed (exit 6).
var ErrLagging = errors.New("the change stream is not caught up")

// CutoverOptions configure a cutover.
type CutoverOptions struct {
	// MaxLag refuses a cutover whose stream is further behind than this
	// when it begins (0: any): the write freeze lasts about that long.
	MaxLag time.Duration
	// Timeout bounds the wait for the stream to catch up; when it passes,
	// the cutover gives up and changes nothing.
	Timeout  time.Duration
	KeepSlot bool // leave the replication slot at the source (PostgreSQL)
	NoVerify bool
}

// Cutover is what a cutover measured (`migrate cutover --json`).
type Cutover struct {
	Plan         string        `json:"plan"`
	SourcePos    stream.Pos    `json:"source_pos"`  // the source's end when the cutover began
	AppliedPos   stream.Pos    `json:"applied_pos"` // the stream's committed position that covered it
	LagAtStartMs int64         `json:"lag_at_start_ms"`
	CatchUpMs    int64         `json:"catch_up_ms"`
	VerifyMs     int64         `json:"verify_ms"`
	FreezeMs     int64         `json:"write_freeze_ms"` // from the cutover's start (writes stopped) to the stream stopped
	Changes      int64         `json:"changes_applied"`
	Verify       *Verification `json:"verify,omitempty"`
	SlotDropped  bool          `json:"slot_dropped"`
}

// Cutover is the operator's step once the application stopped writing to
// the source: it waits until the stream's committed position covers the
// source's end, verifies every table, stops the stream and drops what
// capture created at the source (the slot unless KeepSlot). A verification
// that finds differences leaves the stream running (ErrDiff).
func (r *Runner) Cutover(ctx context.Context, o CutoverOptions) (*Cutover, error) {
	start := time.Now()
	c := &Cutover{Plan: r.plan.Name}
	st, err := apply.Read(ctx, r.dst, r.dstD, r.plan.Name, false)
	if err != nil {
		return c, err
	}
	if st.State == apply.Stopped {
		return c, fmt.Errorf("%w: the stream of %s was stopped already (a cutover ran)", hold.ErrHalted, r.plan.Name)
	}
	if c.SourcePos, err = r.capture.Current(ctx); err != nil {
		return c, fmt.Errorf("read the source's position: %w", err)
	}
	lag := streamLag(st)
	c.LagAtStartMs = lag.Milliseconds()
	if o.MaxLag > 0 && lag > o.MaxLag {
		return c, fmt.Errorf("%w: the stream is %s behind the source (more than --max-lag %s): the write freeze would last about that long; let it catch up with the application still writing, then cut over again",
			ErrLagging, lag.Round(time.Millisecond), o.MaxLag)
	}
	wctx := ctx
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	r.log.Info("waiting for the change stream to reach the source's end", "source_pos", c.SourcePos, "applied_pos", st.Pos)
	for {
		st, err = apply.Read(ctx, r.dst, r.dstD, r.plan.Name, false)
		if err != nil {
			return c, err
		}
		ok, err := r.capture.Covers(st.Pos, c.SourcePos)
		if err != nil {
			return c, err
		}
		if ok {
			break
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return c, context.Cause(ctx)
			}
			return c, fmt.Errorf("%w: after %s the stream is at %s, the source at %s; nothing was changed (is an instance running `migrate run --follow`? is the application still writing?)",
				ErrLagging, o.Timeout, st.Pos, c.SourcePos)
		case <-time.After(50 * time.Millisecond):
		}
	}
	c.AppliedPos, c.Changes = st.Pos, st.Changes
	c.CatchUpMs = time.Since(start).Milliseconds()
	if !o.NoVerify {
		t0 := time.Now()
		v, err := r.Verify(ctx, "")
		c.Verify, c.VerifyMs = v, time.Since(t0).Milliseconds()
		if err != nil {
			return c, err
		}
		r.announceVerified(ctx, v, false)
		if !v.Equal {
			return c, fmt.Errorf("%w: the stream keeps running; see the differences, then `migrate repair` or cut over again", ErrDiff)
		}
	}
	// Announced before the stream stops: its instances deliver what is
	// pending as they end.
	if c.Verify != nil {
		r.planDone(ctx, c.Verify.Tables)
	} else {
		r.planDone(ctx, nil)
	}
	if err := apply.SetState(ctx, r.dst, r.dstD, r.plan.Name, apply.Stopped); err != nil {
		return c, err
	}
	c.FreezeMs = time.Since(start).Milliseconds()
	if err := r.capture.Stop(ctx, o.KeepSlot); err != nil {
		return c, fmt.Errorf("the stream is stopped, but what capture created at the source was not dropped (run `migrate abandon`): %w", err)
	}
	c.SlotDropped = !o.KeepSlot
	return c, nil
}

// Abandon stops a plan's stream and drops what capture created at the
// source (the slot and the publication), whatever state it is in: a plan
// given up must not keep the source's log.
func (r *Runner) Abandon(ctx context.Context) error {
	err := apply.SetState(ctx, r.dst, r.dstD, r.plan.Name, apply.Stopped)
	if err != nil && !errors.Is(err, apply.ErrNoStream) {
		return err
	}
	return r.capture.Stop(ctx, false)
}

// streamLag is how far the stream was behind when the applier last
// committed, and the time since if the source has moved on since then is
// unknown here: the lag it recorded.
func streamLag(st apply.State) time.Duration { return st.Lag }
