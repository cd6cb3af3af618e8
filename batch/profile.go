package batch

import (
	"sync/atomic"
	"time"
)

// Phase is one step of a batch, timed by Profile.
type Phase int

// The phases of a batch, in order: the source page (query and decode), its
// encoding for the bulk path (both on the read-ahead goroutine, overlapping
// the write of the previous batch), then the target transaction's steps.
const (
	PhaseRead   Phase = iota // source page: query, scan, convert
	PhaseEncode              // bulk encoding of the page
	PhaseBegin               // connection, BEGIN and the transaction's bounds
	PhaseFence               // the watermark check
	PhaseLoad                // the rows: bulk load or fenced upsert
	PhaseCursor              // the cursor's advance
	PhaseCommit              // COMMIT
	phases
)

var phaseNames = [phases]string{"read", "encode", "begin", "fence", "load", "cursor", "commit"}

func (p Phase) String() string { return phaseNames[p] }

// Profile sums the time a copy spent in each phase of its batches (safe
// for the reader's and the writer's goroutines at once).
type Profile struct {
	ns      [phases]atomic.Int64
	batches atomic.Int64
}

// since adds the time since t0 to phase p and returns now (a nil Profile
// only returns now).
func (pr *Profile) since(p Phase, t0 time.Time) time.Time {
	now := time.Now()
	if pr != nil {
		pr.ns[p].Add(int64(now.Sub(t0)))
	}
	return now
}

// batch counts a committed batch.
func (pr *Profile) batch() {
	if pr != nil {
		pr.batches.Add(1)
	}
}

// PerBatch is the mean time of each phase per committed batch, in
// milliseconds, by phase name; nil before the first batch (or for a nil
// Profile).
func (pr *Profile) PerBatch() map[string]float64 {
	if pr == nil {
		return nil
	}
	n := pr.batches.Load()
	if n == 0 {
		return nil
	}
	out := make(map[string]float64, phases)
	for p := range phases {
		out[p.String()] = float64(pr.ns[p].Load()) / float64(n) / 1e6
	}
	return out
}
