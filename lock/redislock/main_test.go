package redislock

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/lock/locktest"
)

// TestMain fails the package if a renewal goroutine (or anything else)
// outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestConformance runs the lock contract's suite against a real Redis:
// the shared one, and private ones for the restarts (with an append-only
// file fsynced at every write, so a restart keeps the data unless wiped).
func TestConformance(t *testing.T) {
	addr := hostPort(t, testsvc.RedisURL(t))
	rdb := sharedClient(t)
	locktest.Run(t, locktest.Harness{
		Addr: addr,
		Open: func(t *testing.T, addr string, _ time.Duration) lock.Backend {
			return New(newClient(t, "redis://"+addr+"/0"), "redis://"+addr+"/0", slog.New(slog.NewTextHandler(t.Output(), nil)))
		},
		Tamper: func(t *testing.T, base string) {
			if err := rdb.Del(t.Context(), LeaseKey(base)).Err(); err != nil {
				t.Fatal(err)
			}
		},
		Private: func(t *testing.T) locktest.Private { return testsvc.StartRedis(t, true) },
	})
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// newClient opens a go-redis client on url, closed when the test ends.
// Context deadlines bound its socket I/O, as the lease expects.
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
		_ = rdb.Del(ctx, LeaseKey(base), TokenKey(base), LastKey(base)).Err()
	})
	return base
}

// newLocker is a Locker on rdb; the client is the test's to close.
func newLocker(t *testing.T, rdb redis.UniversalClient, opts lock.Options) *lock.Locker {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	l, err := lock.New(New(unclosed{rdb}, "redis", opts.Logger), opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// unclosed leaves closing the client to the test that opened it.
type unclosed struct{ redis.UniversalClient }

func (unclosed) Close() error { return nil }

func mustAcquire(t *testing.T, l *lock.Locker, base, owner string) *lock.Lease {
	t.Helper()
	le, err := l.Acquire(t.Context(), base, owner)
	if err != nil {
		t.Fatalf("acquire %s as %s: %v", base, owner, err)
	}
	t.Cleanup(func() { _ = le.Release(context.WithoutCancel(t.Context())) })
	return le
}
