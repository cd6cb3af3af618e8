package runner

import (
	"github.com/migrate-dev/migrate/postload"
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
	PostLoad *postload.Report `json:"post_load"`
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
	// most, on the plan's lock service (lock.Locker.MaxWait): the TTL
	// counted from the last renewal, plus how late a standby can learn of
	// the expiry (its poll, TTL/10, on the database and Redis; the
	// service's expiry check on etcd). rto_ms - predicted_rto_ms is then
	// the takeover's own work beyond the configured wait, or negative.
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
