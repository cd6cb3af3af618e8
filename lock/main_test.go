package lock

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// TestMain fails the package if a renewal goroutine (or anything else)
// outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newClient opens a go-redis client on url, closed when the test ends. Context
// deadlines bound its socket I/O, as the lease expects.
func newClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1 // a test sees each failure
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// sharedClient is a client on the shared test Redis.
func sharedClient(t *testing.T) *redis.Client {
	t.Helper()
	return newClient(t, testsvc.RedisURL(t))
}

// newBase returns a unique lease name whose keys are deleted after the test.
func newBase(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	base := "migrate:{" + testsvc.Prefix(t) + "}"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Second)
		defer cancel()
		_ = rdb.Del(ctx, leaseKey(base), tokenKey(base), lastKey(base)).Err()
	})
	return base
}

func newLocker(t *testing.T, rdb RedisClient, opts Options) *Locker {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	l, err := New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustAcquire(t *testing.T, l *Locker, base, owner string) *Lease {
	t.Helper()
	le, err := l.Acquire(t.Context(), base, owner)
	if err != nil {
		t.Fatalf("acquire %s as %s: %v", base, owner, err)
	}
	t.Cleanup(func() { _ = le.Release(context.WithoutCancel(t.Context())) })
	return le
}

// alive reports whether the lease's context is still live.
func alive(le *Lease) bool { return le.Context().Err() == nil }

// waitDone waits up to d for the lease to end and returns when it did.
func waitDone(t *testing.T, le *Lease, d time.Duration) time.Time {
	t.Helper()
	select {
	case <-le.Done():
		return time.Now()
	case <-time.After(d):
		t.Fatalf("lease %s still live after %v (deadline in %v)", le.Key(), d, time.Until(le.Deadline()))
		return time.Time{}
	}
}
