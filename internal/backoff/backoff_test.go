package backoff

import (
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	for n, d := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 6: 10 * time.Second, 40: 10 * time.Second} {
		for range 100 {
			if got := Delay(n); got < d/2 || got >= d*3/2 {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v)", n, got, d/2, d*3/2)
			}
		}
	}
}
