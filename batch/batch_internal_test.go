package batch

import (
	"strings"
	"testing"
)

func TestChunks(t *testing.T) {
	small := []any{int64(1), "x"}
	big := []any{int64(2), strings.Repeat("y", maxStatementBytes/2+1)}
	for _, c := range []struct {
		name string
		rows [][]any
		per  int
		want []int
	}{
		{"by row count", [][]any{small, small, small, small, small}, 2, []int{2, 2, 1}},
		{"large rows never share a statement past the byte limit", [][]any{big, big, big}, 10, []int{1, 1, 1}},
		{"small rows join a large one under the limit", [][]any{small, big, small, big}, 10, []int{3, 1}},
		{"none", nil, 5, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sizes []int
			for _, ch := range chunks(c.rows, c.per) {
				sizes = append(sizes, len(ch))
			}
			if len(sizes) != len(c.want) {
				t.Fatalf("chunk sizes %v, want %v", sizes, c.want)
			}
			for i := range c.want {
				if sizes[i] != c.want[i] {
					t.Fatalf("chunk sizes %v, want %v", sizes, c.want)
				}
			}
		})
	}
}
