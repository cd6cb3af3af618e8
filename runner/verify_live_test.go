package runner

import (
	"testing"

	"github.com/migrate-dev/migrate/verify"
)

// TestLiveKeys: a live verification reports only the differences found in
// every round, counted by kind; with none left, no sample either.
func TestLiveKeys(t *testing.T) {
	first := &liveKeys{}
	for _, d := range []struct {
		kind string
		key  int
	}{{"missing", 1}, {"changed", 2}, {"extra", 3}, {"changed", 4}} {
		if err := first.Differs(d.kind, []any{d.key}); err != nil {
			t.Fatal(err)
		}
	}
	second := &liveKeys{}
	_ = second.Differs("changed", []any{2}) // still differs
	_ = second.Differs("extra", []any{3})   // still differs
	_ = second.Differs("missing", []any{4}) // another kind: in flight
	_ = second.Differs("changed", []any{5}) // new: in flight
	first.keep(second)
	res := first.result(verify.Result{Missing: 1, Changed: 2, Extra: 1, Samples: []verify.Sample{{Key: "2"}}})
	if res.Missing != 0 || res.Changed != 1 || res.Extra != 1 || len(res.Samples) != 1 {
		t.Errorf("after two rounds: %+v, want changed 1 (key 2), extra 1 (key 3)", res)
	}
	third := &liveKeys{}
	first.keep(third)
	if res := first.result(res); !res.Equal() || len(res.Samples) != 0 {
		t.Errorf("after a round without differences: %+v, want equal and no sample", res)
	}
	// Too many to intersect: the last round's result stands.
	full := &liveKeys{full: true}
	if res := full.result(verify.Result{Changed: 7}); res.Changed != 7 {
		t.Errorf("a comparison with more differences than kept: %+v", res)
	}
}
