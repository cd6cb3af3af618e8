package runner

import "testing"

func TestParallelFor(t *testing.T) {
	for _, tc := range []struct {
		shards, cores int
		free          []int
		want          int
	}{
		{8, 2, nil, 2},                // cores
		{8, 1, nil, 2},                // at least 2 per instance by cores
		{1, 16, nil, 1},               // no more than the shards
		{8, 16, []int{90, 1000}, 8},   // plenty of connections
		{32, 16, []int{60, 1000}, 12}, // source: (60/2-6)/2 = 12
		{32, 16, []int{1000, 20}, 2},  // target: (20/2-6)/2 = 2
		{32, 16, []int{1000, 5}, 1},   // none to spare: still 1
	} {
		if got := parallelFor(tc.shards, tc.cores, tc.free...); got != tc.want {
			t.Errorf("parallelFor(%d, %d, %v) = %d, want %d", tc.shards, tc.cores, tc.free, got, tc.want)
		}
	}
}
