package runner

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/internal/faultpoint"
	"github.com/migrate-dev/migrate/outbox"
	"github.com/migrate-dev/migrate/postload"
	"github.com/migrate-dev/migrate/verify"
)

// The run's events (outbox): each is recorded in the transaction of the
// state change it reports, under its fence check where it has one, with an
// id derived from what it reports, so that recording it again (a holder
// that replays the change after a crash) is a no-op.

// maxReason bounds the text of a halt's reason in an event.
const maxReason = 4000

// announce records the event typ about parts, with data, in q (the state
// change's transaction). Nothing when the run has no outbox.
func (r *Runner) announce(ctx context.Context, q fence.Querier, typ string, data any, parts ...any) error {
	if r.outbox == nil {
		return nil
	}
	if err := r.outbox.Add(ctx, q, r.plan.Name, typ, outbox.ID(r.plan.Name, typ, parts...), data); err != nil {
		return err
	}
	faultpoint.Hit("outbox.before_commit", typ)
	return nil
}

// announced is told of an event whose transaction committed: it counts it
// and wakes the deliverer.
func (r *Runner) announced(typ string) {
	r.opts.Metrics.EventProduced(typ)
	if r.notify != nil {
		r.notify.Kick()
	}
}

// shardEvent is the data every shard event carries.
type shardEvent struct {
	Table  string `json:"table"`
	Target string `json:"target"`
	Shard  int    `json:"shard"`
	Token  int64  `json:"token"`
}

func (w *shardWork) event(token int64) shardEvent {
	return shardEvent{Table: w.j.table.Name, Target: w.j.table.Target, Shard: w.j.spec.Shard.Index, Token: token}
}

// shardDone is the data of shard.done.
type shardDone struct {
	shardEvent
	RowsDone int64 `json:"rows_done"`
}

// shardHalted is the data of shard.halted and postload.halted.
type shardHalted struct {
	shardEvent
	Reason        string `json:"reason"`
	ResumeCommand string `json:"resume_command"`
}

// shardTakenOver is the data of shard.taken_over: the takeover's RTO up
// to the claim (the neighbourhood check that follows is in status and the
// log), and the holder it replaced.
type shardTakenOver struct {
	shardEvent
	PreviousOwner  string `json:"previous_owner"`
	PreviousToken  int64  `json:"previous_token"`
	WaitMs         int64  `json:"wait_ms"`
	ElectMs        int64  `json:"elect_ms"`
	RecoverMs      int64  `json:"recover_ms"`
	RtoMs          int64  `json:"rto_ms"`
	PredictedRtoMs int64  `json:"predicted_rto_ms"`
	ResumeAfter    string `json:"resume_after"`
	RowsDone       int64  `json:"rows_done"`
}

// TakenOver records shard.taken_over in the claim's transaction
// (hold.Announced).
func (w *shardWork) TakenOver(ctx context.Context, tx *sql.Tx, c *hold.Claim) error {
	r, s := w.r, c.Unit
	ev := shardTakenOver{shardEvent: w.event(c.Lease.Token()),
		PreviousOwner: c.Previous.Owner, PreviousToken: c.Previous.Token,
		WaitMs: c.Wait.Milliseconds(), ElectMs: c.Elect.Milliseconds(), RecoverMs: c.Took.Milliseconds(),
		PredictedRtoMs: r.PredictedRTO().Milliseconds(), ResumeAfter: w.cp.LastText, RowsDone: w.cp.RowsDone}
	ev.RtoMs = ev.WaitMs + ev.ElectMs + ev.RecoverMs
	return r.announce(ctx, tx, "shard.taken_over", ev, s.Table, s.Index, c.Lease.Token())
}

// resumeCommand is the command that resumes a halted shard (index < 0:
// the post-load phase, resumed with the whole plan).
func (r *Runner) resumeCommand(table string, index int) string {
	plan := r.plan.File
	if plan == "" {
		plan = r.plan.Name + ".yaml"
	}
	cmd := "migrate resume -p " + shellQuote(plan)
	if index >= 0 {
		cmd += " --table " + shellQuote(table) + " --shard " + strconv.Itoa(index)
	}
	return cmd
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-/:=@", c))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// reason is err's text for an event, bounded.
func reason(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > maxReason {
		s = s[:maxReason] + "…"
	}
	return s
}

// postloadEvent records postload.done, or postload.halted with its cause
// (postload.Phase.Announce).
func (r *Runner) postloadEvent(ctx context.Context, tx fence.Querier, done bool, token int64, cause error) error {
	ev := shardHalted{shardEvent: shardEvent{Table: postload.Name, Target: postload.Name, Shard: -1, Token: token}}
	typ := "postload.done"
	if !done {
		typ, ev.Reason, ev.ResumeCommand = "postload.halted", reason(cause), r.resumeCommand("", -1)
	}
	return r.announce(ctx, tx, typ, ev, token)
}

// tableVerified is the data of table.verified.
type tableVerified struct {
	Table      string `json:"table"`
	Equal      bool   `json:"equal"`
	SourceRows int64  `json:"source_rows"`
	TargetRows int64  `json:"target_rows"`
	Missing    int64  `json:"missing"`
	Extra      int64  `json:"extra"`
	Changed    int64  `json:"changed"`
}

// announceVerified records table.verified for each table v checked, and
// plan.done when every table was equal and done is true. Verification is
// not a fenced change: several instances may verify the same copy, and
// the id (the table and its counts) makes their results one event when
// they agree.
func (r *Runner) announceVerified(ctx context.Context, v *Verification, done bool) {
	if r.outbox == nil || v == nil {
		return
	}
	for _, res := range v.Tables {
		ev := tableVerified{Table: res.Table, Equal: res.Equal(), SourceRows: res.SourceRows, TargetRows: res.TargetRows,
			Missing: res.Missing, Extra: res.Extra, Changed: res.Changed}
		r.record(ctx, "table.verified", ev, res.Table, res.SourceRows, res.TargetRows, res.Missing, res.Extra, res.Changed)
	}
	if done && v.Equal {
		r.planDone(ctx, v.Tables)
	}
}

// planDone records plan.done: once per plan, whoever finishes it.
func (r *Runner) planDone(ctx context.Context, tables []verify.Result) {
	var rows int64
	for _, t := range tables {
		rows += t.TargetRows
	}
	r.record(ctx, "plan.done", map[string]any{"tables": len(r.plan.Tables), "verified": len(tables) > 0, "rows": rows})
}

// planEnded reports whether plan.done is recorded (when the outbox cannot
// be read, it says so: a finished plan is not verified again for that).
func (r *Runner) planEnded(ctx context.Context) bool {
	if r.outbox == nil {
		return true
	}
	evs, err := r.outbox.Events(ctx, r.dst, r.plan.Name)
	if err != nil {
		r.log.Warn("could not read the run events", "err", err)
		return true
	}
	return slices.ContainsFunc(evs, func(e outbox.Event) bool { return e.Type == "plan.done" })
}

// record writes one event in a transaction of its own; a failure is
// logged (the copy is done and right; only its announcement is late).
func (r *Runner) record(ctx context.Context, typ string, data any, parts ...any) {
	err := r.announce(ctx, r.dst, typ, data, parts...)
	if err != nil {
		r.log.Warn("could not record a run event", "type", typ, "err", err)
		return
	}
	r.announced(typ)
}

// drainTimeout bounds how long the end of a run waits for its events to
// be delivered; what is left is delivered by the next run, or by
// `migrate events deliver`.
const drainTimeout = 15 * time.Second

// deliver starts delivering the run's events, and returns what ends it:
// a wait of up to drainTimeout for what is still pending, then the end of
// the delivery lease.
func (r *Runner) deliver(ctx context.Context) (stop func()) {
	if r.notify == nil {
		return func() {}
	}
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		r.notify.Run(dctx)
	}()
	return func() {
		if n := r.notify.Drain(ctx, drainTimeout); n > 0 {
			r.log.Warn("run events not delivered yet; they stay in the outbox, and the next `migrate run` or `migrate events deliver` delivers them", "pending", n)
		}
		cancel()
		<-ended
	}
}
