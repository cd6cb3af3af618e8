package runner

import (
	"encoding/json"

	"github.com/migrate-dev/migrate/verify"
)

// Report is the result of a run; its JSON keys are the contract of SPEC §4.
type Report struct {
	Plan            string        `json:"plan"`
	Instance        string        `json:"instance"`
	Owner           string        `json:"owner"`
	RowsWritten     int64         `json:"rows_written"`
	Batches         int           `json:"batches"`
	StaleRejections int           `json:"stale_rejections"`
	ReplayedRows    int64         `json:"replayed_rows"`
	ElapsedMs       int64         `json:"elapsed_ms"`
	Parallel        int           `json:"parallel"` // shards held at once at most (--parallel, or its default)
	Takeovers       []Takeover    `json:"takeovers"`
	Shards          []ShardResult `json:"shards"`
	Verify          *Verification `json:"verify"` // null when skipped
	// PostLoad is the post-load phase (sequence resets, secondary
	// indexes, foreign keys); null when the run stopped before it.
	PostLoad *PostLoadReport `json:"post_load"`
	// Notes are what of the source the target does not reproduce, and
	// the source's objects that are not copied (views, triggers,
	// routines, grants): never silently left out.
	Notes       []string `json:"notes"`
	NotMigrated []string `json:"not_migrated"`
	Error       string   `json:"error,omitempty"` // why the run failed
}

// Takeover records one shard taken over from a holder that did not release
// its lease, and its RTO along the critical path (SPEC §6).
type Takeover struct {
	Table         string `json:"table"`  // the plan's table name (its source)
	Target        string `json:"target"` // the target table
	Shard         int    `json:"shard"`
	Token         int64  `json:"token"`
	PreviousOwner string `json:"previous_owner"`
	WaitMs        int64  `json:"wait_ms"`
	ElectMs       int64  `json:"elect_ms"`
	RecoverMs     int64  `json:"recover_ms"`
	VerifyMs      int64  `json:"verify_ms"`
	RtoMs         int64  `json:"rto_ms"`
	// PredictedRtoMs is what the configuration allows the wait to be at
	// most: the TTL counted from the last renewal, plus the standby's poll
	// period (TTL/10). rto_ms - predicted_rto_ms is then the takeover's
	// own work beyond the configured wait, or negative.
	PredictedRtoMs int64  `json:"predicted_rto_ms"`
	PreviousToken  int64  `json:"previous_token"`
	ReplayedRows   int64  `json:"replayed_rows"`
	ResumedAfter   string `json:"resumed_after"`
	// ResumeKey is the key the copy resumed after, as the checkpoint holds
	// it (JSON, cursor.DecodeKey); "" when it started from the beginning.
	ResumeKey string `json:"resume_key"`
	// The check of the resume neighbourhood: the last committed batch
	// before the resume point, compared with the source (verify_ms).
	CheckedRows int64 `json:"checked_rows"`
	CheckDiffs  int64 `json:"check_differences"`
}

// ShardResult says what this instance did with one shard.
type ShardResult struct {
	Table   string `json:"table"`
	Target  string `json:"target"`
	Shard   int    `json:"shard"`
	State   string `json:"state"`
	Token   int64  `json:"token"`
	Rows    int64  `json:"rows"`
	Batches int    `json:"batches"`
	ByOther bool   `json:"done_by_other"`
}

// Verification is a row-by-row comparison of source and target (package
// verify); its JSON keys are the contract of SPEC §4.
type Verification struct {
	Equal  bool            `json:"equal"`
	Tables []verify.Result `json:"tables"`
}

// Status is the durable state of a plan, for operators (SPEC §4).
type Status struct {
	Plan   string        `json:"plan"`
	Tables []ShardStatus `json:"tables"`
	Leases []LeaseStatus `json:"leases"`
	Totals []TableTotal  `json:"totals"` // per table of the plan, in plan order
	// PostLoad is the post-load phase; null before setup recorded it.
	PostLoad *PostLoadStatus `json:"post_load"`
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
