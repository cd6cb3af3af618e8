package bench

import (
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want Figure
	}{
		{"none", nil, Figure{}},
		{"one", []float64{2.5}, Some(2.5)},
		{"odd", []float64{3, 1, 2}, Some(2)},
		{"even: mean of the middle two", []float64{4, 1, 3, 2}, Some(2.5)},
		{"ties", []float64{1, 1, 5}, Some(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			if got := Median(in); got != tc.want {
				t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("Median sorted its input: %v", in)
			}
		})
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Figure
		want Figure
	}{
		{"both", Some(3), Some(2), Some(1.5)},
		{"no numerator", Figure{}, Some(2), Figure{}},
		{"no denominator", Some(3), Figure{}, Figure{}},
		{"zero denominator", Some(3), Some(0), Figure{}},
		{"zero numerator", Some(0), Some(2), Some(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Ratio(tc.a, tc.b); got != tc.want {
				t.Errorf("Ratio(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestLarger(t *testing.T) {
	if got := Larger(Some(1), Some(2)); got != Some(2) {
		t.Errorf("Larger(1, 2) = %v", got)
	}
	if got := Larger(Some(3), Some(2)); got != Some(3) {
		t.Errorf("Larger(3, 2) = %v", got)
	}
	if got := Larger(Some(3), Figure{}); got.Valid {
		t.Errorf("Larger(3, none) = %v, want none: the pipeline's slower end is unknown", got)
	}
}

func TestGoal_Verdict(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    Goal
		want string
	}{
		{"below at most", Goal{Value: Some(1.2), Op: AtMost, Target: 1.5}, "MET"},
		{"at the bound", Goal{Value: Some(1.5), Op: AtMost, Target: 1.5}, "MET"},
		{"above at most", Goal{Value: Some(1.51), Op: AtMost, Target: 1.5}, "NOT MET"},
		{"above at least", Goal{Value: Some(2.5), Op: AtLeast, Target: 2}, "MET"},
		{"at least, at the bound", Goal{Value: Some(2), Op: AtLeast, Target: 2}, "MET"},
		{"below at least", Goal{Value: Some(1.9), Op: AtLeast, Target: 2}, "NOT MET"},
		{"not measured", Goal{Op: AtMost, Target: 1.5}, "n/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.g.Verdict(); got != tc.want {
				t.Errorf("Verdict() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResults(t *testing.T) {
	r := NewResults()
	r.Record("pg-pg.run", Sample{Run: 1, Seconds: 3, RSSKB: 20 * 1024})
	r.Record("pg-pg.run", Sample{Run: 2, Seconds: 1, RSSKB: 30 * 1024})
	r.Record("pg-pg.replay", Sample{Run: 1, Seconds: 5, RSSKB: 25 * 1024})
	r.Fail("my-my.run", "migrate run exit 1: boom")
	r.Fail("my-my.run", "migrate run exit 1: boom")
	r.Fail("my-pg.pgloader", "pgloader exit 1")

	t.Run("Median", func(t *testing.T) {
		if got := r.Median("pg-pg.run"); got != Some(2) {
			t.Errorf("Median = %v, want 2", got)
		}
		if got := r.Median("my-my.run"); got.Valid {
			t.Errorf("Median of a failed key = %v, want none", got)
		}
	})
	t.Run("MaxRSSMB", func(t *testing.T) {
		if got := r.MaxRSSMB("pg-pg.run", "pg-pg.replay", "my-my.run"); got != Some(30) {
			t.Errorf("MaxRSSMB = %v, want 30", got)
		}
		if got := r.MaxRSSMB("my-my.run"); got.Valid {
			t.Errorf("MaxRSSMB of no sample = %v, want none", got)
		}
	})
	t.Run("Failures", func(t *testing.T) {
		want := []Failure{{"my-my.run", "migrate run exit 1: boom"}, {"my-pg.pgloader", "pgloader exit 1"}}
		if got := r.Failures(); !slices.Equal(got, want) {
			t.Errorf("Failures = %v, want %v", got, want)
		}
		if !r.Failed("my-my.run") || r.Failed("pg-pg.run") {
			t.Error("Failed is wrong")
		}
	})
	t.Run("Broken", func(t *testing.T) {
		if !r.Broken() {
			t.Error("Broken = false with a failed migrate run")
		}
		only := NewResults()
		only.Fail("pg-pg.pgloader", "heap exhausted")
		if only.Broken() {
			t.Error("Broken = true with only pgloader failing")
		}
	})
}
