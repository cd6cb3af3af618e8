package drill

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/runner"
	"github.com/migrate-dev/migrate/status"
	"github.com/migrate-dev/migrate/stream/apply"
)

// The stream drills (stream-kill, stream-pause): the instances run `migrate
// run --follow`; a writer changes the source meanwhile; the fault hits the
// instance that holds the change stream's lease once it has applied
// changes; once a standby has taken the stream over, applied changes
// after the takeover and the copy is done, the drill stops the writer and
// cuts over (runner.Cutover, as `migrate cutover`), after which every
// instance still running exits 0.

// The stream's unit in leases and watermarks (apply.Unit).
const streamUnit = apply.Name

var streamShard = apply.Unit("").Index

// streams reports whether the kind is a stream drill.
func (k Kind) streams() bool { return k == StreamKill || k == StreamPause }

// DefaultWriteRate is the stream drills' writer's pace: source
// transactions per second.
const DefaultWriteRate = 20

// cutoverTimeout bounds the cutover's wait for the stream to catch up.
const cutoverTimeout = time.Minute

// appliedLog is what an applier logs when it opens the stream at the
// committed position (runner), with from= and token=.
const appliedLog = `msg="applying the change stream"`

// childArgs are the arguments of the instances' `migrate run`.
func (d *drill) childArgs() []string {
	if d.hook != nil {
		return d.hook.args(d.o.PlanArgs)
	}
	if d.o.Kind.streams() {
		return append(append([]string{}, d.o.PlanArgs...), "--follow")
	}
	return d.o.PlanArgs
}

// streamMark reads the stream's watermark (the watcher's mark).
func (d *drill) streamMark(ctx context.Context) (int64, string, error) {
	w, owner, err := d.status.Fence.Watermark(ctx, d.status.Target, apply.Unit(d.plan.Name))
	return int64(w), owner, err
}

// startWriter starts the writer once the holder has recorded the stream:
// every change it commits is then in the stream.
func (d *drill) startWriter(ctx context.Context) error {
	err := d.w.waitFor(ctx, 2*time.Minute, "the change stream recorded by the holder", func(st *status.Status) bool {
		return st.Stream != nil
	}, d.holder)
	if err != nil {
		return err
	}
	if d.wr, err = newWriter(ctx, d.plan, d.o.WriteRate, d.log); err != nil {
		return err
	}
	d.wr.start()
	d.log.Info("the writer changes the source", "table", d.wr.stats.Table, "rows", len(d.wr.live), "per_second", d.o.WriteRate)
	return nil
}

// waitStreamHolder waits until the holder holds the stream's lease and has
// applied changes, and records its owner id and token.
func (d *drill) waitStreamHolder(ctx context.Context) error {
	stuck := false
	err := d.w.waitFor(ctx, 2*time.Minute, "the holder applying the writer's changes", func(st *status.Status) bool {
		if stuck = d.wr.stuck(); stuck {
			return true
		}
		l, ok := streamLease(st)
		if !ok || !strings.HasPrefix(l.Owner, holderName+"-") || st.Stream == nil || st.Stream.Changes == 0 {
			return false
		}
		d.owner, d.streamTok = l.Owner, l.Token
		return true
	}, d.holder)
	if err == nil && stuck {
		err = fmt.Errorf("drill: the source refused every change of the writer: %s", d.wr.Stats().LastError)
	}
	if err == nil {
		d.log.Info("the holder applies the stream", "owner", d.owner, "token", d.streamTok)
	}
	return err
}

// streamLease is the stream's lease in st.
func streamLease(st *status.Status) (status.LeaseStatus, bool) {
	for _, l := range st.Leases {
		if l.Table == streamUnit && l.Shard == streamShard {
			return l, true
		}
	}
	return status.LeaseStatus{}, false
}

// heldShards records the shards the holder is copying when the fault
// strikes: a standby must take those over too.
func (d *drill) heldShards(st *status.Status) {
	done := map[shardKey]bool{}
	for _, t := range st.Tables {
		done[shardKey{t.Table, t.Shard}] = t.State == "done"
	}
	for _, l := range st.Leases {
		if k := (shardKey{l.Table, l.Shard}); l.Shard >= 0 && l.Owner == d.owner && !done[k] {
			d.tokens[k] = l.Token
		}
	}
}

// streamHolderNow makes the instance that holds the stream's lease now
// the one the fault strikes: the holder, or a standby when the stream
// changed hands before the fault (the holder's applier failed and gave its
// lease back, or lost it); the holder then stands by instead, and the
// report lists the instance struck first.
func (d *drill) streamHolderNow(ctx context.Context) error {
	var l status.LeaseStatus
	var c *child
	err := d.w.waitFor(ctx, 5*d.plan.LeaseTTL+30*time.Second, "an instance holding the change stream", func(st *status.Status) bool {
		var ok bool
		if l, ok = streamLease(st); ok {
			c = d.child(label(l.Owner))
		}
		return c != nil && !c.exited()
	})
	if err != nil || c == d.holder {
		d.streamTok = l.Token
		return err
	}
	last := d.holder.stderr.matching(apply.Unit(d.plan.Name).String())
	d.log.Warn("the change stream changed hands before the fault: the fault strikes the instance holding it", "instance", c.name,
		"token", l.Token, "instead_of", d.holder.name, "its_last_line_of_the_stream", strings.Join(last[max(0, len(last)-1):], ""))
	for i, s := range d.standbys {
		if s == c {
			d.standbys[i] = d.holder
		}
	}
	d.holder.role, c.role = "standby", "holder"
	d.holder, d.owner, d.streamTok = c, l.Owner, l.Token
	return nil
}

// streamMoved reports whether the last sample shows the stream's lease
// held by another instance than the holder.
func (d *drill) streamMoved() bool {
	st, _ := d.w.latest()
	if st == nil {
		return false
	}
	l, ok := streamLease(st)
	return ok && label(l.Owner) != d.holder.name
}

// child is the instance named name, nil if none.
func (d *drill) child(name string) *child {
	for _, c := range d.children() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// streamFault kills or stops the stream's holder, and waits for a standby
// to take the stream (and any shard the holder held) over; a stopped
// holder is woken after that, and the lease TTL at least.
func (d *drill) streamFault(ctx context.Context) error {
	if d.o.Kind == StreamPause {
		if err := d.holder.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		err := d.longFault(ctx)
		return errors.Join(err, d.holder.signal(syscall.SIGCONT))
	}
	if err := d.holder.signal(syscall.SIGKILL); err != nil {
		return err
	}
	d.holder.wait(ctx, 10*time.Second)
	d.rep.FaultMs = 0
	return d.takeoverSeen(ctx)
}

// streamTaken reports whether a standby has claimed the stream's
// watermark above the holder's token.
func (d *drill) streamTaken() bool {
	s, ok := d.w.lastStream()
	return ok && s.token > d.streamTok && label(s.owner) != d.holder.name
}

// cutover waits until the copy is done and the successor has applied
// changes after the takeover, stops the writer and cuts over.
func (d *drill) cutover(ctx context.Context) error {
	var after int64
	if s, ok := d.w.lastStream(); ok {
		after = s.changes
	}
	// The standbys must not exit before the cutover; a woken holder may
	// (fenced, exit 4).
	err := d.w.waitFor(ctx, 3*time.Minute+5*d.plan.LeaseTTL, "the copy done and changes applied after the takeover", func(st *status.Status) bool {
		for _, t := range st.Tables {
			if t.State != "done" {
				return false
			}
		}
		if len(st.Tables) == 0 || st.PostLoad != nil && st.PostLoad.State != "done" {
			return false
		}
		s, ok := d.w.lastStream()
		return ok && s.changes > after && s.token > d.streamTok
	}, d.standbys...)
	if err != nil {
		return err
	}
	d.rep.Stream.Writer = d.wr.stop()
	d.log.Info("the writer stopped; cutting over", "transactions", d.rep.Stream.Writer.Transactions, "changes", d.rep.Stream.Writer.Changes)
	r, err := d.o.OpenRunner(ctx, d.plan, runner.Options{Log: d.log}, false)
	if err != nil {
		return err
	}
	defer r.Close()
	c, err := r.Cutover(ctx, runner.CutoverOptions{Timeout: cutoverTimeout})
	if c != nil && c.SourcePos != "" {
		d.rep.Stream.Cutover = c
	}
	if err != nil {
		d.rep.Stream.CutoverError = err.Error()
		return fmt.Errorf("drill: cutover: %w", err)
	}
	d.log.Info("cut over", "write_freeze_ms", c.FreezeMs, "catch_up_ms", c.CatchUpMs)
	return nil
}

// finishStream waits for the instances to exit after the cutover: the
// standbys and a woken holder that went on as a standby exit 0 once they
// see the stream stopped.
func (d *drill) finishStream(ctx context.Context) error {
	limit := 3*d.plan.LeaseTTL + time.Minute
	for _, c := range d.children() {
		if !c.exited() && !c.wait(ctx, limit) {
			return fmt.Errorf("drill: %s (%s) still ran %v after the cutover; killed", c.name, c.role, limit)
		}
		d.log.Info("an instance exited", "instance", c.name, "exit", c.exitCode())
	}
	return nil
}

// abandon stops the stream and drops what it keeps at the source, after a
// drill that failed before its cutover: no replication slot is left.
func (d *drill) abandon(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	r, err := d.o.OpenRunner(ctx, d.plan, runner.Options{Log: d.log}, false)
	if err == nil {
		defer r.Close()
		err = r.Abandon(ctx)
	}
	if err != nil {
		d.log.Error("could not abandon the change stream: run `migrate abandon`", "err", err)
		return
	}
	d.log.Info("abandoned the change stream: its slot is dropped")
}

// collectStream fills the stream's report from the samples, the
// instances' logs, the target and the source.
func (d *drill) collectStream(ctx context.Context) {
	s := d.rep.Stream
	s.HolderToken = d.streamTok
	if d.wr != nil {
		s.Writer = d.wr.stop()
	}
	samples := d.w.streamSamples()
	s.FirstApplyMs = -1
	var atTakeover *streamSample
	for i := range samples {
		x := &samples[i]
		switch {
		case x.at.Before(d.faultAt):
			s.ChangesAtFault = x.changes
			if x.token == d.streamTok {
				atTakeover = x
			}
		case x.token == d.streamTok:
			atTakeover = x
		case x.token > d.streamTok && s.SuccessorToken == 0:
			s.SuccessorToken, s.Successor = x.token, label(x.owner)
			s.HandoverMs = x.at.Sub(d.faultAt).Milliseconds()
		}
		if atTakeover != nil && x.token > d.streamTok && x.changes > atTakeover.changes && s.FirstApplyMs < 0 {
			s.FirstApplyMs = x.at.Sub(d.faultAt).Milliseconds()
		}
	}
	if atTakeover != nil {
		s.PosAtTakeover = atTakeover.pos
	}
	d.resumed()
	s.StaleRefused = d.staleRefused()
	if st, err := d.status.Read(ctx); err == nil && st.Stream != nil {
		s.AppliedChanges = st.Stream.Changes
		s.ReplayedChanges = s.AppliedChanges - s.Writer.Changes
		if atTakeover != nil {
			s.ChangesAfterTakeover = s.AppliedChanges - atTakeover.changes
		}
	}
	if d.plan.Source.Engine() == plans.Postgres && d.status.Capture != nil {
		_, ok, err := d.status.Capture.Retained(ctx, "")
		s.SlotLeft = err != nil || ok
	}
	d.rep.RtoMs = max(d.rep.RtoMs, s.RtoMs)
}

// resumed reads from the standbys' logs where the successor opened the
// stream, and when.
func (d *drill) resumed() {
	s := d.rep.Stream
	var first time.Time
	for _, c := range d.standbys {
		for _, line := range c.stderr.matching(appliedLog, apply.Unit(d.plan.Name).String()) {
			f := logFields(line)
			tok, _ := strconv.ParseInt(f["token"], 10, 64)
			at, err := time.Parse(time.RFC3339Nano, f["time"])
			if err != nil || tok <= d.streamTok || !first.IsZero() && !at.Before(first) {
				continue
			}
			first, s.ResumedFrom = at, f["from"]
			if s.Successor == "" {
				s.Successor, s.SuccessorToken = c.name, tok
			}
		}
	}
	if !first.IsZero() {
		s.RtoMs = first.Sub(d.faultAt).Milliseconds()
	}
}

// staleRefused counts the distinct tokens of the holder's the target's
// fence refused to its applier (fence.StaleError, in its log).
func (d *drill) staleRefused() int {
	re := regexp.MustCompile(regexp.QuoteMeta(apply.Unit(d.plan.Name).String()) + `: token (\d+) of \S+ refused`)
	seen := map[string]bool{}
	for _, line := range d.holder.stderr.matching("refused") {
		for _, m := range re.FindAllStringSubmatch(line, -1) {
			seen[m[1]] = true
		}
	}
	return len(seen)
}

// label is the instance name an owner id begins with (drill-b-1f2e… →
// drill-b).
func label(owner string) string {
	if i := strings.LastIndexByte(owner, '-'); i > 0 {
		return owner[:i]
	}
	return owner
}

// logFields parses a log line of key=value pairs (log/slog's text
// format: a value with spaces or quotes is quoted).
func logFields(line string) map[string]string {
	out := map[string]string{}
	for s := strings.TrimSpace(line); s != ""; s = strings.TrimLeft(s, " ") {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			break
		}
		k, rest := s[:eq], s[eq+1:]
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			out[k], _ = strconv.Unquote(q)
			s = rest[len(q):]
			continue
		}
		end := strings.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		out[k], s = rest[:end], rest[end:]
	}
	return out
}
