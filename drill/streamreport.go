package drill

import (
	"fmt"
	"strings"

	"github.com/migrate-dev/migrate/runner"
)

// StreamReport is what a stream drill measured of the change stream.
type StreamReport struct {
	HolderToken    int64  `json:"holder_token"`    // the holder's token on the stream when the fault struck
	Successor      string `json:"successor"`       // the instance that took the stream over
	SuccessorToken int64  `json:"successor_token"` // its token
	// RtoMs is from the fault to the successor opening the stream at the
	// committed position, having claimed its lease and watermark (the time
	// of its log line); HandoverMs to the drill seeing the successor's
	// claim of the watermark (sampled every TTL/20); FirstApplyMs to the
	// first sample in which the successor had applied changes (-1: none
	// seen).
	RtoMs          int64 `json:"rto_ms"`
	HandoverMs     int64 `json:"handover_ms"`
	FirstApplyMs   int64 `json:"first_apply_ms"`
	ChangesAtFault int64 `json:"changes_at_fault"` // applied when the fault struck
	// PosAtTakeover is the position the target had committed when the
	// successor claimed the stream (the holder's last commit), and
	// ResumedFrom the one the successor opened the stream at (its log).
	// Equal, it read again nothing the target had committed: only the
	// holder's transaction in flight, which never committed.
	PosAtTakeover        string `json:"pos_at_takeover"`
	ResumedFrom          string `json:"resumed_from"`
	ChangesAfterTakeover int64  `json:"changes_after_takeover"` // applied by the successors, until the cutover
	// AppliedChanges is the stream's count of row changes applied, at the
	// end; the writer committed Writer.Changes, every one after the stream
	// began. ReplayedChanges is the difference: changes applied twice.
	AppliedChanges  int64 `json:"applied_changes"`
	ReplayedChanges int64 `json:"replayed_changes"`
	// StaleRefused counts the old holder's applier transactions the
	// target's fence refused (its log); 0 when it stopped before trying
	// one, its lease gone.
	StaleRefused int             `json:"stale_refused"`
	Writer       WriterStats     `json:"writer"`
	Cutover      *runner.Cutover `json:"cutover"` // null when it did not run
	CutoverError string          `json:"cutover_error,omitempty"`
	// SlotLeft: a replication slot of the plan is left at the source
	// (PostgreSQL) after the drill.
	SlotLeft bool `json:"slot_left"`
}

// checkStream checks a stream drill's change stream: resumed where the
// target had committed, every change applied once, changes applied after
// the takeover, the writer's changes committed, the cutover, and no slot
// left behind.
func (r *Report) checkStream(add addFunc) {
	s := r.Stream
	if s == nil {
		add("change stream measured", false, "no measurement of the stream")
		return
	}
	add("stream resumed at the committed position", s.ResumedFrom != "" && s.ResumedFrom == s.PosAtTakeover,
		"the target had committed %q when the successor claimed the stream; it opened the stream at %q", s.PosAtTakeover, s.ResumedFrom)
	w := s.Writer
	add("every change applied once", s.ReplayedChanges >= 0 && s.ReplayedChanges <= w.MaxTxChanges,
		"%d changes applied, %d committed by the writer (%d transactions of at most %d changes): %d applied twice, at most one source transaction's worth allowed",
		s.AppliedChanges, w.Changes, w.Transactions, w.MaxTxChanges, s.ReplayedChanges)
	add("changes applied after the takeover", s.ChangesAfterTakeover > 0,
		"%d changes applied by the successor (first seen %dms after the fault); %d before the fault", s.ChangesAfterTakeover, s.FirstApplyMs, s.ChangesAtFault)
	add("the writer's changes committed", w.Transactions > 0 && w.Failures == 0,
		"%d transactions on %s: %d inserts, %d updates, %d deletes; %d failed %s", w.Transactions, w.Table, w.Inserts, w.Updates, w.Deletes, w.Failures, w.LastError)
	c := s.Cutover
	switch {
	case c == nil:
		add("cutover", false, "it did not run: %s", s.CutoverError)
	default:
		add("cutover", s.CutoverError == "" && c.FreezeMs > 0 && c.Verify != nil && c.Verify.Equal,
			"caught up with %s in %dms, verified in %dms: write freeze %dms (lag at start %dms) %s", c.SourcePos, c.CatchUpMs, c.VerifyMs, c.FreezeMs, c.LagAtStartMs, s.CutoverError)
	}
	add("no replication slot left", !s.SlotLeft, "slot left at the source: %v", s.SlotLeft)
}

// checkStreamTakeover checks that a standby took the stream over from the
// holder, and every shard the holder was copying.
func (r *Report) checkStreamTakeover(add addFunc) {
	s := r.Stream
	h := r.holder().Name
	ok := s != nil && s.HolderToken > 0 && s.SuccessorToken > s.HolderToken && s.Successor != "" && s.Successor != h
	detail := "no takeover of the stream seen"
	if s != nil {
		detail = fmt.Sprintf("token %d of %s -> %d of %s: opened the stream %dms after the fault (predicted takeover %dms), claim seen after %dms",
			s.HolderToken, h, s.SuccessorToken, s.Successor, s.RtoMs, r.PredictedRtoMs, s.HandoverMs)
	}
	add("stream taken over", ok, "%s", detail)
	ok, parts := r.takenOver()
	if len(parts) == 0 {
		add("held shards taken over", true, "the holder was copying no shard at the fault")
		return
	}
	add("held shards taken over", ok, "takeovers per shard: %s", strings.Join(parts, ", "))
}
