// Package status reads a plan's durable state — checkpoints, fence
// watermarks, takeovers and the holders' pace from the target, live leases
// from the lock service, the post-load phase — into one model, and renders
// it as text. It writes nothing. `migrate status` and the drills use it.
package status

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/outbox"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/postload"
	"github.com/migrate-dev/migrate/records"
	"github.com/migrate-dev/migrate/stream"
	"github.com/migrate-dev/migrate/stream/apply"
)

// Status is the durable state of a plan, for operators (SPEC §4).
type Status struct {
	Plan   string        `json:"plan"`
	Tables []ShardStatus `json:"tables"`
	Leases []LeaseStatus `json:"leases"`
	Totals []TableTotal  `json:"totals"` // per table of the plan, in plan order
	// PostLoad is the post-load phase; null before setup recorded it.
	PostLoad *PostLoadStatus `json:"post_load"`
	// Stream is the change stream (migrate run --follow); null without one.
	Stream *StreamStatus `json:"stream"`
	// Notify is the delivery of the plan's run events to each of its
	// sinks, in the plan's order; Events are the latest events of the
	// outbox, newest first (see events.go).
	Notify []SinkStatus  `json:"notify"`
	Events []EventStatus `json:"events"`
}

// StreamStatus is the change stream as the target records it: its state
// (following, stopping, stopped), the position committed with the changes
// applied, and the capture's lag when the applier last committed.
type StreamStatus struct {
	State        string     `json:"state"`
	Pos          string     `json:"pos"`
	StartPos     string     `json:"start_pos"`
	Transactions int64      `json:"transactions"`
	Changes      int64      `json:"changes"`
	LagMs        int64      `json:"lag_ms"`
	LagBytes     int64      `json:"lag_bytes"`
	AppliedAt    *time.Time `json:"applied_at"`
	// RetainedBytes is the source's log kept for the stream (PostgreSQL:
	// the slot's retained WAL; -1 unknown, null when not read).
	RetainedBytes *int64 `json:"retained_bytes"`
}

// PostLoadStatus is the post-load phase's state (pending, running, done,
// halted) and its steps (indexes, foreign keys), done or not.
type PostLoadStatus struct {
	State     string `json:"state"`
	Steps     int    `json:"steps"`
	StepsDone int    `json:"steps_done"`
}

// TableTotal sums a table's shards. RowsEstimated is the source's estimate
// that the holders publish (null before any did); RowsPerSec sums the
// running shards' rates, and EtaMs is the rows left at that pace (null
// while no running shard has a rate, 0 when every shard is done).
type TableTotal struct {
	Table         string   `json:"table"`
	Target        string   `json:"target"`
	Shards        int      `json:"shards"`
	ShardsDone    int      `json:"shards_done"`
	ShardsRunning int      `json:"shards_running"`
	RowsDone      int64    `json:"rows_done"`
	RowsEstimated *int64   `json:"rows_estimated"`
	RowsPerSec    *float64 `json:"rows_per_sec"`
	EtaMs         *int64   `json:"eta_ms"`
}

// ShardStatus is one checkpoint row.
type ShardStatus struct {
	Table     string          `json:"table"`
	Target    string          `json:"target"`
	Shard     int             `json:"shard"`
	State     string          `json:"state"`
	RowsDone  int64           `json:"rows_done"`
	LastKey   json.RawMessage `json:"last_key"`
	Token     int64           `json:"token"`
	UpdatedAt string          `json:"updated_at"`
	Watermark int64           `json:"watermark"`
	Holder    string          `json:"holder"`
	// Takeovers counts the shard's takeovers within the plan's
	// takeover_window (the target keeps them); LastTakeover is the last one, as
	// in run --json takeovers[], or null.
	Takeovers    int64           `json:"takeovers"`
	LastTakeover json.RawMessage `json:"last_takeover"`
	// RowsPerSec and EtaMs are what the lease's current holder published
	// within the last TTL (null otherwise); EtaMs is 0 for a done shard.
	RowsPerSec *float64 `json:"rows_per_sec"`
	EtaMs      *int64   `json:"eta_ms"`
	// HaltReason is why a halted shard halted and ResumeCommand the
	// command that resumes it, from its shard.halted event ("" otherwise).
	HaltReason    string `json:"halt_reason"`
	ResumeCommand string `json:"resume_command"`
}

// LeaseStatus is one live lease in the lock service.
type LeaseStatus struct {
	Table  string `json:"table"`
	Target string `json:"target"`
	Shard  int    `json:"shard"`
	Owner  string `json:"owner"`
	Token  int64  `json:"token"`
	TTLMs  int64  `json:"ttl_ms"`
}

// Reader reads one plan's state.
type Reader struct {
	Plan   *plans.Plan
	Target *sql.DB
	SQL    interface {
		TableExists([]string) (string, []any)
		apply.StateSQL
	}
	// Capture, if set, tells how much of the source's log the stream
	// keeps (status shows it; nil: not shown).
	Capture stream.Capture
	Cursor  *cursor.Store
	Fence   *fence.Fence
	Records *records.Store
	Locker  *lock.Locker
	Steps   postload.Store
	Outbox  *outbox.Store // nil: no events read
}

// Read reads the plan's state: checkpoints, watermarks, takeovers and the
// holders' pace from the target; live leases from the lock service.
func (rd *Reader) Read(ctx context.Context) (*Status, error) {
	st := &Status{Plan: rd.Plan.Name, Tables: []ShardStatus{}, Leases: []LeaseStatus{}, Totals: []TableTotal{}}
	cps, err := rd.checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	shards := Shards(rd.Plan, cps)
	holders, err := rd.leases(ctx, st, shards)
	if err != nil {
		return nil, err
	}
	estimates := map[string]int64{}
	for _, cp := range cps {
		ss, est, err := rd.shard(ctx, cp, holders)
		if err != nil {
			return nil, err
		}
		if est > 0 {
			estimates[cp.Shard.Table] = est
		}
		st.Tables = append(st.Tables, ss)
	}
	for _, t := range rd.Plan.Tables {
		st.Totals = append(st.Totals, total(t, shards[t.Target], st.Tables, estimates))
	}
	steps, err := rd.Steps.Recorded(ctx, rd.Target)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", rd.Plan.Target, err)
	}
	if st.Stream, err = rd.stream(ctx); err != nil {
		return nil, err
	}
	if err := rd.events(ctx, st); err != nil {
		return nil, err
	}
	if len(steps) > 0 {
		st.PostLoad = &PostLoadStatus{State: steps.State(), Steps: len(steps) - 1}
		for _, s := range steps[1:] {
			if s.State == postload.Done {
				st.PostLoad.StepsDone++
			}
		}
	}
	return st, nil
}

// checkpoints lists the plan's checkpoints; none on a target without
// their table.
func (rd *Reader) checkpoints(ctx context.Context) ([]cursor.Checkpoint, error) {
	var exists bool
	q, args := rd.SQL.TableExists([]string{dialect.CheckpointTable})
	if err := rd.Target.QueryRowContext(ctx, q, args...).Scan(&exists); err != nil {
		return nil, fmt.Errorf("target %s: %w", rd.Plan.Target, err)
	}
	if !exists {
		return nil, nil
	}
	return rd.Cursor.List(ctx, rd.Target, rd.Plan.Name)
}

// shard is one checkpoint's status, and the table's row estimate its
// holder published (0 when none).
func (rd *Reader) shard(ctx context.Context, cp cursor.Checkpoint, holders map[fence.Shard]string) (ShardStatus, int64, error) {
	w, holder, err := rd.Fence.Watermark(ctx, rd.Target, cp.Shard)
	if err != nil {
		return ShardStatus{}, 0, err
	}
	name := cp.Shard.Table
	if t, ok := rd.Plan.ByTarget(cp.Shard.Table); ok {
		name = t.Name
	}
	n, last, err := rd.Records.Takeovers(ctx, cp.Shard, rd.Plan.TakeoverWindow)
	if err != nil {
		return ShardStatus{}, 0, fmt.Errorf("target %s: %w", rd.Plan.Target, err)
	}
	lastJSON := json.RawMessage("null")
	if json.Valid([]byte(last)) {
		lastJSON = json.RawMessage(last)
	}
	ss := ShardStatus{
		Table: name, Target: cp.Shard.Table, Shard: cp.Shard.Index, LastKey: lastKeyJSON(cp.LastText), State: string(cp.State), RowsDone: cp.RowsDone,
		Token: int64(cp.Token), UpdatedAt: cp.UpdatedAt.UTC().Format(time.RFC3339Nano),
		Watermark: int64(w), Holder: holder, Takeovers: n, LastTakeover: lastJSON,
	}
	var est int64
	switch p, ok, err := rd.Records.ReadPace(ctx, cp.Shard); {
	case err != nil:
		return ss, 0, fmt.Errorf("target %s: %w", rd.Plan.Target, err)
	case cp.State == cursor.Done:
		ss.EtaMs = new(int64(0))
		if ok {
			est = p.TableRows
		}
	case ok && cp.State == cursor.Running && p.Owner == holders[cp.Shard]:
		ss.RowsPerSec = new(p.RowsPerSec)
		if p.EtaMs >= 0 {
			ss.EtaMs = new(p.EtaMs)
		}
		est = p.TableRows
	}
	return ss, est, nil
}

// Shards is each table's shard count (by target name): the plan's, or, for
// a `shards: auto` table that setup has split, the count of its
// checkpoints (cps); a table not set up yet keeps the plan's.
func Shards(p *plans.Plan, cps []cursor.Checkpoint) map[string]int {
	n := map[string]int{}
	for _, cp := range cps {
		n[cp.Shard.Table]++
	}
	out := map[string]int{}
	for _, t := range p.Tables {
		out[t.Target] = t.Shards
		if (t.Shards == plans.ShardsAuto || t.AutoShards) && n[t.Target] > 0 {
			out[t.Target] = n[t.Target]
		}
	}
	return out
}

// Units are the plan's leased units: every table's shards, and its
// post-load phase.
func Units(p *plans.Plan, shards map[string]int) []fence.Shard {
	var out []fence.Shard
	for _, t := range p.Tables {
		for i := range shards[t.Target] {
			out = append(out, fence.Shard{Plan: p.Name, Table: t.Target, Index: i})
		}
	}
	return append(out, postload.Unit(p.Name), apply.Unit(p.Name), outbox.Unit(p.Name))
}

// leases lists the shards' live leases in st and returns their holders.
func (rd *Reader) leases(ctx context.Context, st *Status, shards map[string]int) (map[fence.Shard]string, error) {
	holders := map[fence.Shard]string{}
	for _, t := range rd.Plan.Tables {
		for i := 0; i < shards[t.Target]; i++ {
			s := fence.Shard{Plan: rd.Plan.Name, Table: t.Target, Index: i}
			info, err := rd.Locker.Inspect(ctx, hold.Base(s))
			if err != nil {
				return nil, fmt.Errorf("lock %s: %w", rd.Locker, err)
			}
			if info.Held {
				holders[s] = info.Owner
				st.Leases = append(st.Leases, LeaseStatus{Table: t.Name, Target: t.Target, Shard: i, Owner: info.Owner, Token: info.Token, TTLMs: info.TTL.Milliseconds()})
			}
		}
	}
	// The plan's other units: the post-load phase, the change stream, the
	// delivery of its events.
	for _, u := range []fence.Shard{postload.Unit(rd.Plan.Name), apply.Unit(rd.Plan.Name), outbox.Unit(rd.Plan.Name)} {
		info, err := rd.Locker.Inspect(ctx, hold.Base(u))
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", rd.Locker, err)
		}
		if info.Held {
			holders[u] = info.Owner
			st.Leases = append(st.Leases, LeaseStatus{Table: u.Table, Target: u.Table, Shard: u.Index, Owner: info.Owner, Token: info.Token, TTLMs: info.TTL.Milliseconds()})
		}
	}
	return holders, nil
}

// Remembered counts the plan's units whose lease the lock service keeps a
// holder of, present or past (a drill starts from none), and returns them
// all.
func (rd *Reader) Remembered(ctx context.Context) (int, []fence.Shard, error) {
	cps, err := rd.checkpoints(ctx)
	if err != nil {
		return 0, nil, err
	}
	units := Units(rd.Plan, Shards(rd.Plan, cps))
	n := 0
	for _, u := range units {
		info, err := rd.Locker.Inspect(ctx, hold.Base(u))
		if err != nil {
			return 0, nil, fmt.Errorf("lock %s: %w", rd.Locker, err)
		}
		if info.Held || info.Last.Owner != "" {
			n++
		}
	}
	return n, units, nil
}

// PredictedRTO is the longest wait the plan's lock service allows before
// a standby takes over (lock.Locker.MaxWait).
func (rd *Reader) PredictedRTO() time.Duration { return rd.Locker.MaxWait() }

// total sums the shards of table t, which has n of them.
func total(t plans.Table, n int, shards []ShardStatus, estimates map[string]int64) TableTotal {
	tt := TableTotal{Table: t.Name, Target: t.Target, Shards: n}
	var perSec float64
	rated := false
	for _, s := range shards {
		if s.Target != t.Target {
			continue
		}
		tt.RowsDone += s.RowsDone
		switch s.State {
		case string(cursor.Done):
			tt.ShardsDone++
		case string(cursor.Running):
			tt.ShardsRunning++
			if s.RowsPerSec != nil {
				perSec += *s.RowsPerSec
				rated = true
			}
		}
	}
	if est, ok := estimates[t.Target]; ok {
		tt.RowsEstimated = new(max(est, tt.RowsDone))
	}
	switch {
	case tt.Shards > 0 && tt.ShardsDone == tt.Shards: // an auto table not split yet has none
		tt.EtaMs = new(int64(0))
	case rated:
		tt.RowsPerSec = new(perSec)
		if tt.RowsEstimated != nil && perSec > 0 {
			tt.EtaMs = new(int64(float64(*tt.RowsEstimated-tt.RowsDone) / perSec * 1000))
		}
	}
	return tt
}

// lastKeyJSON shows a stored cursor as JSON: a one-part key as its value
// (numbers stay numbers), a composite key as an array, none as null.
func lastKeyJSON(text string) json.RawMessage {
	var parts []json.RawMessage
	if text == "" || json.Unmarshal([]byte(text), &parts) != nil {
		return json.RawMessage("null")
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return json.RawMessage(text)
}

// stream reads the plan's change stream; nil without one.
func (rd *Reader) stream(ctx context.Context) (*StreamStatus, error) {
	q, args := rd.SQL.TableExists([]string{dialect.StreamTable})
	var exists bool
	if err := rd.Target.QueryRowContext(ctx, q, args...).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	s, err := apply.Read(ctx, rd.Target, rd.SQL, rd.Plan.Name, false)
	if errors.Is(err, apply.ErrNoStream) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ss := &StreamStatus{State: s.State, Pos: string(s.Pos), StartPos: string(s.StartPos), Transactions: s.Txs, Changes: s.Changes,
		LagMs: s.Lag.Milliseconds(), LagBytes: s.LagBytes}
	if !s.AppliedAt.IsZero() {
		ss.AppliedAt = &s.AppliedAt
	}
	if rd.Capture != nil && s.State != apply.Stopped {
		if n, _, err := rd.Capture.Retained(ctx, s.Pos); err == nil {
			ss.RetainedBytes = &n
		}
	}
	return ss, nil
}
