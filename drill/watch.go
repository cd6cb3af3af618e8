package drill

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/migrate-dev/migrate/status"
)

// watcher samples the plan's durable state (`migrate status`: checkpoints,
// fence watermarks, leases, the change stream) while a drill runs, and
// records every change of a shard's lease or watermark, and of the
// stream's.
type watcher struct {
	r     *status.Reader
	every time.Duration
	start time.Time
	log   *slog.Logger
	// mark, when set, reads the change stream's watermark with each
	// sample (status lists its lease, not its watermark).
	mark func(ctx context.Context) (token int64, owner string, err error)

	mu      sync.Mutex
	last    *status.Status
	changed chan struct{} // closed and replaced at each new sample
	history []Event
	seen    map[string]Event // last event per shard and kind
	streams []streamSample   // with mark: the stream in every sample
}

// streamSample is the change stream in one sample: its watermark, and the
// position and counts the target had committed.
type streamSample struct {
	at      time.Time
	token   int64
	owner   string
	pos     string
	changes int64
	state   string
}

// Event is one change seen in a shard's lease (the lock service) or fence watermark
// (target).
type Event struct {
	AtMs  int64  `json:"at_ms"` // since the drill started
	Kind  string `json:"kind"`  // "lease" or "fence"
	Table string `json:"table"`
	Shard int    `json:"shard"`
	Owner string `json:"owner"` // "" when the lease is free
	Token int64  `json:"token"`
}

func newWatcher(r *status.Reader, ttl time.Duration, start time.Time, log *slog.Logger) *watcher {
	return &watcher{r: r, every: min(max(ttl/20, 20*time.Millisecond), 250*time.Millisecond), start: start, log: log,
		changed: make(chan struct{}), seen: map[string]Event{}}
}

// run samples until ctx ends. A failed sample (the lock service restarting) is skipped.
func (w *watcher) run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		st, err := w.r.Read(ctx)
		var ss *streamSample
		if err == nil && w.mark != nil && st.Stream != nil {
			ss = &streamSample{at: time.Now(), pos: st.Stream.Pos, changes: st.Stream.Changes, state: st.Stream.State}
			ss.token, ss.owner, err = w.mark(ctx)
		}
		if err == nil {
			w.record(st, ss)
		} else if ctx.Err() == nil {
			w.log.Debug("status sample failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *watcher) record(st *status.Status, ss *streamSample) {
	at := time.Since(w.start).Milliseconds()
	w.mu.Lock()
	defer w.mu.Unlock()
	note := func(e Event) {
		k := fmt.Sprintf("%s\x00%s\x00%d", e.Kind, e.Table, e.Shard)
		if prev, ok := w.seen[k]; ok && prev.Owner == e.Owner && prev.Token == e.Token {
			return
		}
		if _, ok := w.seen[k]; !ok && e.Owner == "" && e.Token == 0 {
			return // nothing yet
		}
		e.AtMs = at
		w.seen[k] = e
		w.history = append(w.history, e)
	}
	held := map[string]bool{}
	for _, l := range st.Leases {
		held[fmt.Sprintf("%s\x00%d", l.Table, l.Shard)] = true
		note(Event{Kind: "lease", Table: l.Table, Shard: l.Shard, Owner: l.Owner, Token: l.Token})
	}
	for _, t := range st.Tables {
		if !held[fmt.Sprintf("%s\x00%d", t.Table, t.Shard)] {
			note(Event{Kind: "lease", Table: t.Table, Shard: t.Shard})
		}
		if t.Watermark > 0 {
			note(Event{Kind: "fence", Table: t.Table, Shard: t.Shard, Owner: t.Holder, Token: t.Watermark})
		}
	}
	if ss != nil {
		if ss.token > 0 {
			note(Event{Kind: "fence", Table: streamUnit, Shard: streamShard, Owner: ss.owner, Token: ss.token})
		}
		w.streams = append(w.streams, *ss)
	}
	w.last = st
	close(w.changed)
	w.changed = make(chan struct{})
}

// events returns the changes recorded so far.
func (w *watcher) events() []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Event{}, w.history...)
}

// streamSamples returns the stream as every sample saw it.
func (w *watcher) streamSamples() []streamSample {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]streamSample{}, w.streams...)
}

// lastStream is the stream in the last sample; ok false before one.
func (w *watcher) lastStream() (streamSample, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.streams) == 0 {
		return streamSample{}, false
	}
	return w.streams[len(w.streams)-1], true
}

// latest returns the last sample (nil before the first) and a channel
// closed at the next one.
func (w *watcher) latest() (*status.Status, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.changed
}

// errAborted means a process the drill depends on exited while it waited.
type errAborted struct{ who *child }

func (e errAborted) Error() string {
	return fmt.Sprintf("%s (%s) exited with code %d", e.who.name, e.who.role, e.who.exitCode())
}

// waitFor waits until cond holds for a sample, at most limit; it fails
// early when one of alive exits.
func (w *watcher) waitFor(ctx context.Context, limit time.Duration, what string, cond func(*status.Status) bool, alive ...*child) error {
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for {
		st, next := w.latest()
		if st != nil && cond(st) {
			return nil
		}
		for _, c := range alive {
			if c.exited() {
				return fmt.Errorf("drill: waiting for %s: %w", what, errAborted{c})
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("drill: %s did not happen within %v", what, limit)
		case <-next:
		case <-time.After(w.every): // re-check the processes
		}
	}
}
