package etcdlock

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/lock/locktest"
	"github.com/migrate-dev/migrate/plans"
)

// TestMain fails the package if a renewal goroutine, a watch or anything
// of etcd's client outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestConformance runs the lock contract's suite against a real etcd: the
// shared one, and private ones for the restarts (killed and started again
// with their data, or with an empty data folder: a replacement cluster
// that lost every key, lease and revision).
func TestConformance(t *testing.T) {
	shared := dsn(t, testsvc.EtcdURL(t))
	admin := open(t, shared)
	locktest.Run(t, locktest.Harness{
		Addr: shared.Hosts()[0],
		Open: func(t *testing.T, addr string, _ time.Duration) lock.Backend {
			return open(t, dsn(t, "etcd://"+addr+"/"+shared.Database()))
		},
		// An operator revokes the holder's etcd lease, which deletes its
		// key too.
		Tamper: func(t *testing.T, base string) {
			kv, v, err := admin.holder(t.Context(), base)
			if err != nil || kv == nil {
				t.Fatalf("tamper: lease key of %s = %v, %v", base, kv, err)
			}
			if _, err := admin.cli.Revoke(t.Context(), clientv3.LeaseID(v.Lease)); err != nil {
				t.Fatal(err)
			}
		},
		Private: func(t *testing.T) locktest.Private { return testsvc.StartEtcd(t) },
	})
}

// dsn parses an etcd URL.
func dsn(t testing.TB, url string) plans.DSN {
	t.Helper()
	d, err := plans.ParseDSN(url)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// open dials d; the backend is closed when the test ends (Close twice is
// fine, for the suite closes what Open returns).
func open(t testing.TB, d plans.DSN) *Backend {
	t.Helper()
	b, err := Dial(d, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// newBase is a lease name unique to the test, forgotten when it ends.
func newBase(t testing.TB, b *Backend) string {
	t.Helper()
	base := "migrate:{" + testsvc.Prefix(t) + "}"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		_ = b.Forget(ctx, base)
	})
	return base
}

// newLocker is a Locker on b with lease TTL ttl; b is the test's to close.
func newLocker(t testing.TB, b *Backend, ttl time.Duration) *lock.Locker {
	t.Helper()
	l, err := lock.New(unclosed{b}, lock.Options{TTL: ttl, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// unclosed leaves closing the backend to the test that opened it.
type unclosed struct{ *Backend }

func (unclosed) Close() error { return nil }

func mustAcquire(t testing.TB, l *lock.Locker, base, owner string) *lock.Lease {
	t.Helper()
	le, err := l.Acquire(t.Context(), base, owner)
	if err != nil {
		t.Fatalf("acquire %s as %s: %v", base, owner, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		_ = le.Release(ctx)
	})
	return le
}

// noSecret fails the test if s holds the password.
func noSecret(t testing.TB, what, s, password string) {
	t.Helper()
	if password != "" && strings.Contains(s, password) {
		t.Errorf("%s shows the password: %s", what, s)
	}
}
