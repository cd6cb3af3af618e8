package apply

import (
	"testing"
	"time"
)

// TestPace: full groups that commit fast grow, doubling up to
// maxGroupFactor × MaxChanges; a slow one halves the size, never below
// MaxChanges; a group that was not full (the source had no more) leaves
// it.
func TestPace(t *testing.T) {
	a := &Applier{MaxChanges: 1000}
	a.limit.Store(1000)
	steps := []struct {
		changes int
		took    time.Duration
		want    int64
	}{
		{1000, 20 * time.Millisecond, 2000},
		{2000, 40 * time.Millisecond, 4000},
		{4000, 80 * time.Millisecond, 8000},
		{8000, 90 * time.Millisecond, 8000},  // at the bound
		{8000, 150 * time.Millisecond, 8000}, // between the target and twice it: kept
		{8000, 250 * time.Millisecond, 4000}, // slow: halved
		{300, 5 * time.Millisecond, 4000},    // not full: kept
		{4000, 900 * time.Millisecond, 2000},
		{2000, 900 * time.Millisecond, 1000},
		{1000, 900 * time.Millisecond, 1000}, // never below MaxChanges
	}
	for i, s := range steps {
		a.pace(Applied{Changes: s.changes, Took: s.took})
		if got := a.limit.Load(); got != s.want {
			t.Fatalf("step %d (%d changes in %v): size %d, want %d", i, s.changes, s.took, got, s.want)
		}
	}
}
