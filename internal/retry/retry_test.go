package retry

import (
	"context"
	"errors"
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

var errX = errors.New("x")

func TestBudget_FailuresSpendIt(t *testing.T) {
	b := Budget{MaxFailures: 2, MaxOutage: time.Hour}
	for i := 1; i <= 2; i++ {
		n, wait, ex := b.Fail(errX, Failure)
		if ex != nil || n != i || wait <= 0 {
			t.Fatalf("failure %d: attempt %d wait %v exhausted %v", i, n, wait, ex)
		}
	}
	_, _, ex := b.Fail(errX, Failure)
	if ex == nil || ex.Failures != 3 || ex.Outage != 0 || !errors.Is(ex, errX) {
		t.Fatalf("third failure: %+v", ex)
	}
}

func TestBudget_OutageIsNotCountedButBounded(t *testing.T) {
	b := Budget{MaxFailures: 0, MaxOutage: 50 * time.Millisecond}
	for range 10 {
		if _, _, ex := b.Fail(errX, Outage); ex != nil {
			t.Fatalf("an outage within MaxOutage spent the budget: %v", ex)
		}
	}
	time.Sleep(60 * time.Millisecond)
	_, _, ex := b.Fail(errX, Outage)
	if ex == nil || ex.Outage < 50*time.Millisecond || ex.Failures != 0 {
		t.Fatalf("outage past MaxOutage: %+v", ex)
	}
}

func TestBudget_FailureEndsAnOutage(t *testing.T) {
	b := Budget{MaxFailures: 1, MaxOutage: 50 * time.Millisecond}
	b.Fail(errX, Outage)
	time.Sleep(60 * time.Millisecond)
	if _, _, ex := b.Fail(errX, Failure); ex != nil {
		t.Fatalf("first failure: %v", ex)
	}
	if _, _, ex := b.Fail(errX, Outage); ex != nil {
		t.Fatalf("a new outage was timed from the old one: %v", ex)
	}
}

func TestBudget_NoMaxOutageCountsOutages(t *testing.T) {
	b := Budget{MaxFailures: 1}
	b.Fail(errX, Outage)
	if _, _, ex := b.Fail(errX, Outage); ex == nil || ex.Failures != 2 {
		t.Fatalf("with MaxOutage 0 outages must count: %+v", ex)
	}
}

func TestBudget_BackoffGrowsWithAttempts(t *testing.T) {
	b := Budget{MaxFailures: 100}
	var last time.Duration
	for i := 1; i <= 8; i++ {
		_, wait, _ := b.Fail(errX, Failure)
		d := min(500*time.Millisecond<<min(i-1, 5), 10*time.Second)
		if wait < d/2 || wait >= d*3/2 {
			t.Fatalf("attempt %d waits %v, want in [%v, %v)", i, wait, d/2, d*3/2)
		}
		last = wait
	}
	if last < 5*time.Second {
		t.Fatalf("the wait is not capped near 10s: %v", last)
	}
}

func TestDo(t *testing.T) {
	ctx := context.Background()
	final := errors.New("final")
	kind := func(err error) Kind {
		switch err {
		case final:
			return Final
		case errX:
			return Failure
		}
		return Now
	}
	calls := 0
	err := Do(ctx, &Budget{MaxFailures: 3}, func() error {
		calls++
		switch calls {
		case 1:
			return errors.New("again at once")
		case 2:
			return final
		}
		return nil
	}, kind, func(error, Kind, int, time.Duration) { t.Fatal("a final or immediate retry was backed off") })
	if err != final || calls != 2 {
		t.Fatalf("Do = %v after %d calls, want the final error after 2", err, calls)
	}

	var retries []int
	err = Do(ctx, &Budget{MaxFailures: 1}, func() error { return errX }, kind,
		func(_ error, k Kind, n int, _ time.Duration) { retries = append(retries, n) })
	var ex *Exhausted
	if !errors.As(err, &ex) || ex.Failures != 2 || len(retries) != 1 {
		t.Fatalf("Do = %v, retries %v; want exhausted after 2 failures, 1 retry", err, retries)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Do(cctx, &Budget{MaxFailures: 9}, func() error { return errX }, kind, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with a cancelled context = %v", err)
	}
}
