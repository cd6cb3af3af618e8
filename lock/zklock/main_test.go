package zklock

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/lock/locktest"
	"github.com/migrate-dev/migrate/plans"
)

// TestMain fails the package if a goroutine — a renewal, a call left
// behind by a caller that gave up, go-zookeeper's own — outlives the
// tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestConformance runs the lock contract's suite against a real
// ZooKeeper: the shared one, and private ones for the restarts. Kept
// data: the holder's session may survive the restart. Wiped: the server
// knows neither the session nor its nodes and refuses the old clients;
// the holder loses its lease, and the suite's next grants, on new
// backends, work once their tokens were raised.
func TestConformance(t *testing.T) {
	dsn := parse(t, testsvc.ZooKeeperURL(t))
	prefix := dsn.Database()
	raw := rawConn(t, dsn.Hosts()[0], nil)
	waited := &bases{}
	t.Cleanup(func() { waited.forget(t, dial(t, dsn.Redacted(), time.Second, nil)) })
	locktest.Run(t, locktest.Harness{
		Addr: dsn.Hosts()[0],
		// A lease is a ZooKeeper session: with the whole suite and a
		// CPU-bound process on two cores, a session of 1s expired
		// (its pings late) in TestConformance/Grant.
		TTL: 2 * time.Second,
		Open: func(t *testing.T, addr string, ttl time.Duration) lock.Backend {
			return waiting{dial(t, "zk://"+addr+"/"+prefix, ttl, nil), waited}
		},
		Tamper: func(t *testing.T, base string) {
			// An operator deletes the holder's node from a session of
			// its own.
			p := (&Backend{prefix: "/" + prefix}).paths(base)
			kids := queued(t, raw, p)
			if len(kids) == 0 {
				t.Fatal("tamper: nothing queued")
			}
			if err := raw.Delete(p.node(kids[0]), -1); err != nil {
				t.Fatal(err)
			}
		},
		Private: func(t *testing.T) locktest.Private { return testsvc.StartZooKeeper(t) },
	})
}

// waiting is a Backend that notes the leases WaitFree was asked about.
// The suite forgets each lease when its test ends, but after a WaitFree
// with no Acquire after it the standby's place is still queued then, until
// the backend closes: those leases are forgotten once every test ended.
type waiting struct {
	*Backend
	b *bases
}

func (w waiting) WaitFree(ctx context.Context, base, owner string, poll time.Duration) error {
	w.b.mu.Lock()
	w.b.names = append(w.b.names, base)
	w.b.mu.Unlock()
	return w.Backend.WaitFree(ctx, base, owner, poll)
}

type bases struct {
	mu    sync.Mutex
	names []string
}

func (bs *bases) forget(t *testing.T, b *Backend) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, base := range bs.names {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		_ = b.Forget(ctx, base)
		cancel()
	}
}

func parse(t *testing.T, rawURL string) plans.DSN {
	t.Helper()
	dsn, err := plans.ParseDSN(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// dial opens a Backend with session timeout ttl, closed when the test
// ends; log defaults to the test's output.
func dial(t *testing.T, rawURL string, ttl time.Duration, log *slog.Logger) *Backend {
	t.Helper()
	if log == nil {
		log = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	b, err := Dial(parse(t, rawURL), ttl, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// locker is a Locker on b, which the test closes.
func locker(t *testing.T, b *Backend, ttl time.Duration) *lock.Locker {
	t.Helper()
	l, err := lock.New(b, lock.Options{TTL: ttl, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// rawConn is a go-zookeeper client of its own on addr, authenticated with
// auth ("user:password") if given, closed when the test ends.
func rawConn(t *testing.T, addr string, auth []byte) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		for range events {
		}
	})
	for c.State() != zk.StateHasSession {
		select {
		case <-time.After(10 * time.Second):
			t.Fatal("no session with the test's own client")
		case <-events:
		}
	}
	if auth != nil {
		if err := c.AddAuth("digest", auth); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// queued lists a lease's queue, first first.
func queued(t *testing.T, c *zk.Conn, p paths) []string {
	t.Helper()
	kids, _, err := c.Children(p.queue)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(kids, bySeq)
	return kids
}

// waitQueued waits until the lease's queue holds n nodes.
func waitQueued(t *testing.T, c *zk.Conn, p paths, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		kids := queued(t, c, p)
		if len(kids) == n {
			return kids
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %v, want %d nodes", kids, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// forget deletes the lease's nodes when the test ends.
func forget(t *testing.T, b *Backend, base string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		_ = b.Forget(ctx, base)
	})
}

// debugLogger logs at every level to buf.
func debugLogger(buf *testsvc.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
