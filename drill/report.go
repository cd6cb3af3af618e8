package drill

import (
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/runner"
)

// Result is the outcome of `migrate drill`: one Report per drill run
// (lock-restart runs once without and once with the lock service's data).
type Result struct {
	Plan   string   `json:"plan"`
	Pass   bool     `json:"pass"`
	Drills []Report `json:"drills"`
	Error  string   `json:"error,omitempty"` // why the drill could not run
}

// Diff reports whether a drill's final verification found differences.
func (r *Result) Diff() bool {
	for _, d := range r.Drills {
		if d.Verify != nil && !d.Verify.Equal {
			return true
		}
	}
	return false
}

// Report is one drill: the fault, what each instance did, the measurements
// and the verdict.
type Report struct {
	Kind        Kind   `json:"kind"`
	Persistence string `json:"persistence,omitempty"` // lock-restart: "on" (data kept) or "off" (lost)
	TTLMs       int64  `json:"ttl_ms"`
	BatchSize   int    `json:"batch_size"`
	FaultAtRows int64  `json:"fault_at_rows"` // rows committed when the fault struck
	FaultMs     int64  `json:"fault_ms"`      // how long the fault lasted

	Instances []Instance `json:"instances"` // the holder first, then the standbys
	Takeovers []Takeover `json:"takeovers"` // from every instance's run --json

	// RtoMs is the longest takeover's rto_ms (the stream's included);
	// PredictedRtoMs is the runner's
	// prediction on the plan's lock service (SPEC §6): TTL + TTL/10 for
	// Redis, a database and ZooKeeper, TTL + 500ms for etcd.
	RtoMs          int64 `json:"rto_ms"`
	PredictedRtoMs int64 `json:"predicted_rto_ms"`

	// HandoverMs is the time from the fault to the moment the drill saw
	// another instance claim the watermark of every shard (sampled every
	// TTL/20); 0 when none did. It is measured from outside, also when the
	// runner records no takeover (the lock service lost its data, so the
	// successor cannot know its predecessor).
	HandoverMs int64 `json:"handover_ms"`

	ReplayedRows        int64 `json:"replayed_rows"`    // every instance's
	ReplayedBatches     int64 `json:"replayed_batches"` // ceil(replayed_rows / batch_size)
	StaleRejections     int   `json:"stale_rejections"` // batches the target refused (fence check)
	StaleWritesAccepted int64 `json:"stale_writes_accepted"`

	Shards    []ShardOutcome       `json:"shards"`
	LateWrite *Late                `json:"late_write,omitempty"`
	Stream    *StreamReport        `json:"stream,omitempty"` // the stream drills
	Notify    *NotifyReport        `json:"notify,omitempty"` // the notify drill
	History   []Event              `json:"history"`          // lease and watermark changes seen
	Verify    *runner.Verification `json:"verify"`           // the final migrate verify; null when it failed to run
	Checks    []Check              `json:"checks"`
	Pass      bool                 `json:"pass"`
	Error     string               `json:"error,omitempty"` // what went wrong while driving the drill
}

// Instance is one `migrate run` process of a drill.
type Instance struct {
	Name            string `json:"name"` // --instance label
	Role            string `json:"role"` // holder or standby
	Owner           string `json:"owner"`
	Exit            int    `json:"exit"`   // -1 when a signal ended it
	Killed          bool   `json:"killed"` // by the drill
	RowsWritten     int64  `json:"rows_written"`
	ReplayedRows    int64  `json:"replayed_rows"`
	StaleRejections int    `json:"stale_rejections"`
	Takeovers       int    `json:"takeovers"`
	// Shards is what it did with each shard (run --json "shards"): it
	// copied it (done_by_other false) or found it done by another.
	Shards  []runner.ShardResult `json:"shards"`
	Error   string               `json:"error,omitempty"`
	LogTail []string             `json:"log_tail,omitempty"` // its last log lines, when the drill failed

	report *runner.Report // nil when it printed none
}

// Takeover is one takeover as the instance that made it reported it.
type Takeover struct {
	Instance string `json:"instance"`
	runner.Takeover
}

// ShardOutcome is what became of one shard the holder held at the fault.
type ShardOutcome struct {
	Table       string `json:"table"`
	Shard       int    `json:"shard"`
	HolderToken int64  `json:"holder_token"` // the holder's token when the fault struck
	Successor   int64  `json:"successor_token"`
	FinalToken  int64  `json:"final_token"` // the checkpoint's at the end
	FinalState  string `json:"final_state"`
	// HolderRows is what the holder reported it committed (-1 when it
	// printed no report); OlderRows the rows still carrying a token below
	// the successor's. Having started on a fresh target, the holder's
	// commits before the takeover are exactly OlderRows: any more were
	// accepted after it and overwritten since (StaleCommitted).
	HolderRows     int64 `json:"holder_rows"`
	OlderRows      int64 `json:"older_rows"`
	StaleCommitted int64 `json:"stale_committed"`
	// StaleAfterResume counts rows after a takeover's resume key whose
	// token is below the takeover's: writes of an older holder that the
	// successor had already passed.
	StaleAfterResume int64 `json:"stale_after_resume"`
}

// Late is what the proxy held back from the holder in a late-write
// drill, and when it delivered it.
type Late struct {
	HeldBytes  int64 `json:"held_bytes"`
	HeldChunks int64 `json:"held_chunks"`
	HeldMs     int64 `json:"held_ms"` // from the first byte held to the delivery
	// DeliveredAfterTakeoverMs is how long after the takeover was seen (the
	// successor's claim of the watermark) the bytes were delivered.
	DeliveredAfterTakeoverMs int64 `json:"delivered_after_takeover_ms"`
}

// Check is one pass criterion.
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

// holder returns the holder instance.
func (r *Report) holder() *Instance { return &r.Instances[0] }

// evaluate sets Checks and Pass from the measurements.
func (r *Report) evaluate() {
	r.Checks = nil
	add := func(name string, ok bool, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Name: name, Pass: ok, Detail: fmt.Sprintf(format, args...)})
	}
	if len(r.Instances) == 0 {
		add("instances started", false, "no instance ran")
		r.Pass = false
		return
	}
	switch v := r.Verify; {
	case v == nil:
		add("verification clean", false, "the verification did not run")
	default:
		var rows, diffs int64
		for _, t := range v.Tables {
			rows, diffs = rows+t.SourceRows, diffs+t.Missing+t.Extra+t.Changed
		}
		add("verification clean", v.Equal, "%d source rows, %d differences", rows, diffs)
	}
	var committed, after int64
	for _, s := range r.Shards {
		committed, after = committed+s.StaleCommitted, after+s.StaleAfterResume
	}
	add("no stale write accepted", r.StaleWritesAccepted == 0,
		"%d accepted: %d committed by the old holder after the takeover, %d older-token rows after a resume key", r.StaleWritesAccepted, committed, after)

	handovers := 0
	for _, s := range r.Shards {
		if s.Successor != 0 {
			handovers++
		}
	}
	worst := int64(0)
	for _, t := range r.Takeovers {
		worst = max(worst, t.ReplayedRows)
	}
	if r.Kind.streams() {
		// The copy also counts the rows the stream wrote before it
		// reached them: only a takeover's own replay is bounded.
		add("at most one batch replayed", worst <= int64(r.BatchSize),
			"at most %d rows by one takeover; batch size %d (%d rows overwritten in all, with those the stream wrote ahead of the copy)", worst, r.BatchSize, r.ReplayedRows)
	} else {
		add("at most one batch replayed", worst <= int64(r.BatchSize) && r.ReplayedRows <= int64(r.BatchSize*max(handovers, 1)),
			"%d rows replayed in all (%d batches), at most %d by one takeover; batch size %d", r.ReplayedRows, r.ReplayedBatches, worst, r.BatchSize)
	}

	r.checkTakeovers(add)
	r.checkExits(add)
	if r.Kind.streams() {
		r.checkStream(add)
	}
	r.checkWriters(add)
	r.checkHistory(add)
	if r.Kind == Notify {
		r.checkNotify(add)
	}
	if r.Kind == LateWrite {
		lw := r.LateWrite
		ok := lw != nil && lw.HeldBytes > 0 && lw.DeliveredAfterTakeoverMs >= 0 && lw.HeldMs >= r.TTLMs
		detail := "the proxy held none of the holder's bytes"
		if lw != nil && lw.HeldBytes > 0 {
			detail = fmt.Sprintf("%d bytes held %dms (TTL %dms), delivered %dms after the takeover", lw.HeldBytes, lw.HeldMs, r.TTLMs, lw.DeliveredAfterTakeoverMs)
		}
		add("late write delivered after the takeover", ok, "%s", detail)
	}
	r.Pass = r.Error == ""
	for _, c := range r.Checks {
		r.Pass = r.Pass && c.Pass
	}
}

type addFunc func(name string, ok bool, format string, args ...any)

// checkTakeovers checks the takeovers the kind implies.
func (r *Report) checkTakeovers(add addFunc) {
	switch {
	case r.Kind.streams():
		r.checkStreamTakeover(add)
	case r.Kind == ShortPause:
		add("no takeover", len(r.Takeovers) == 0 && r.handedOver() == 0, "%d takeovers, %d shards changed hands", len(r.Takeovers), r.handedOver())
	case r.Kind.restartsLock():
		ok, parts := true, []string{}
		for _, s := range r.Shards {
			good := s.FinalToken > s.HolderToken || r.Persistence == "on" && s.FinalToken == s.HolderToken
			ok = ok && good && s.FinalState == "done"
			parts = append(parts, fmt.Sprintf("%s#%d: %d -> %d (%s)", s.Table, s.Shard, s.HolderToken, s.FinalToken, s.FinalState))
		}
		want := "above"
		if r.Persistence == "on" {
			want = "at or above"
		}
		add("token "+want+" the watermark", ok && len(r.Shards) > 0, "final tokens %s", strings.Join(parts, ", "))
	default:
		ok, parts := r.takenOver()
		add("taken over", ok && len(r.Shards) > 0, "takeovers per shard: %s", strings.Join(parts, ", "))
	}
}

// takenOver counts the takeovers of each shard the holder held (with a
// higher token than the holder's): ok when each has one. Those of the
// instances' reports count, and in the notify drill those the outbox's
// shard.taken_over events record (a killed instance prints no report).
func (r *Report) takenOver() (ok bool, parts []string) {
	ok = true
	for _, s := range r.Shards {
		tokens := map[int64]bool{}
		for _, t := range r.Takeovers {
			if t.Table == s.Table && t.Shard == s.Shard && t.Token > s.HolderToken {
				tokens[t.Token] = true
			}
		}
		if r.Notify != nil {
			for _, t := range r.Notify.TakenOver {
				if t.Table == s.Table && t.Shard == s.Shard && t.Token > s.HolderToken {
					tokens[t.Token] = true
				}
			}
		}
		ok = ok && len(tokens) >= 1
		parts = append(parts, fmt.Sprintf("%s#%d: %d", s.Table, s.Shard, len(tokens)))
	}
	return ok, parts
}

func (r *Report) handedOver() int {
	n := 0
	for _, s := range r.Shards {
		if s.FinalToken != s.HolderToken {
			n++
		}
	}
	return n
}

// checkExits checks every instance's exit code against the kind.
func (r *Report) checkExits(add addFunc) {
	h := r.holder()
	var want []int
	switch {
	case r.Kind == Kill || r.Kind == StreamKill || r.Kind == Notify:
		add("holder killed", h.Killed && h.Exit == -1, "exit %d", h.Exit)
	case r.Kind == StreamPause:
		// Woken, it finds its lease gone and a successor in the target
		// (exit 4: fenced, its transaction refused if it had one in
		// flight), or goes on as a standby until the cutover (0).
		want = []int{4, 0}
	case r.Kind == ShortPause:
		want = []int{0}
	case r.Kind.restartsLock():
		// It may have lost its lease while the lock service restarted: it
		// takes the shard again when no standby claimed it first (0), or
		// stops (4).
		want = []int{0, 4}
	default:
		want = []int{4}
	}
	if want != nil {
		detail := fmt.Sprintf("exit %d, want %s", h.Exit, codes(want))
		if r.Stream != nil {
			detail += fmt.Sprintf("; its stale applier transactions refused: %d", r.Stream.StaleRefused)
		}
		add("holder exit", !h.Killed && slices.Contains(want, h.Exit), "%s", detail)
	}
	if r.Kind == Notify {
		r.checkNotifyExits(add)
		return
	}
	ok, parts := true, []string{}
	for _, s := range r.Instances[1:] {
		good := !s.Killed && s.Exit == 0
		if r.Kind == ShortPause && s.report != nil {
			for _, sh := range s.report.Shards {
				good = good && sh.ByOther
			}
		}
		ok = ok && good
		parts = append(parts, fmt.Sprintf("%s exit %d", s.Name, s.Exit))
	}
	name := "standbys exit 0"
	if r.Kind == ShortPause {
		name = "standbys exit 0, every shard done by the holder"
	}
	add(name, ok, "%s", strings.Join(parts, ", "))
}

func codes(c []int) string {
	s := make([]string, len(c))
	for i, v := range c {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, " or ")
}

// checkWriters checks that every shard ended done, finished by at most one
// instance, and that no token was used by two instances.
func (r *Report) checkWriters(add addFunc) {
	ok, problems := true, []string{}
	finished := map[string][]string{}
	writers := map[string]string{}
	for _, in := range r.Instances {
		if in.report == nil {
			continue
		}
		for _, s := range in.report.Shards {
			k := fmt.Sprintf("%s#%d", s.Table, s.Shard)
			if s.State == "done" && !s.ByOther {
				finished[k] = append(finished[k], in.Name)
			}
			if s.ByOther {
				continue
			}
			tk := fmt.Sprintf("%s token %d", k, s.Token)
			if w, dup := writers[tk]; dup && w != in.Name {
				ok = false
				problems = append(problems, fmt.Sprintf("%s used by %s and %s", tk, w, in.Name))
			}
			writers[tk] = in.Name
		}
	}
	for _, s := range r.Shards {
		k := fmt.Sprintf("%s#%d", s.Table, s.Shard)
		if f := finished[k]; len(f) > 1 {
			ok = false
			problems = append(problems, fmt.Sprintf("%s finished by %s", k, strings.Join(f, " and ")))
		}
		if s.FinalState != "done" {
			ok = false
			problems = append(problems, fmt.Sprintf("%s ended %s", k, s.FinalState))
		}
	}
	detail := "every shard done, by one instance, each token used by one instance"
	if !ok {
		detail = strings.Join(problems, "; ")
	}
	add("one writer per shard and token", ok, "%s", detail)
}

// checkHistory checks the lease and watermark changes seen over time: per
// shard the token only grows and each token has one owner. Leases are not
// checked after the lock service lost its data (its tokens restarted: the
// watermark, not the lock service, is the authority, L4).
func (r *Report) checkHistory(add addFunc) {
	lost := r.Kind.restartsLock() && r.Persistence == "off"
	problems := historyProblems(r.History, lost)
	what := "leases and watermarks"
	if lost {
		what = "watermarks (the lock service lost its data: leases not checked)"
	}
	detail := fmt.Sprintf("%d changes of %s seen: tokens only grow, one owner each", len(r.History), what)
	if len(problems) > 0 {
		detail = strings.Join(problems, "; ")
	}
	add("tokens grow, one owner per token", len(problems) == 0, "%s", detail)
}

// historyProblems lists violations in events: a token reused by another
// owner, or a shard's token going down.
func historyProblems(events []Event, skipLeases bool) []string {
	var out []string
	owner := map[string]string{}
	last := map[string]int64{}
	for _, e := range events {
		if e.Owner == "" || skipLeases && e.Kind == "lease" {
			continue
		}
		shard := fmt.Sprintf("%s %s#%d", e.Kind, e.Table, e.Shard)
		tok := fmt.Sprintf("%s token %d", shard, e.Token)
		if o, ok := owner[tok]; ok && o != e.Owner {
			out = append(out, fmt.Sprintf("%s held by %s and %s", tok, o, e.Owner))
		}
		owner[tok] = e.Owner
		if e.Token < last[shard] {
			out = append(out, fmt.Sprintf("%s went from token %d down to %d at %dms", shard, last[shard], e.Token, e.AtMs))
		}
		last[shard] = max(last[shard], e.Token)
	}
	return out
}
