package records

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// sharedClient is a client on the shared test Redis, closed when the test
// ends.
func sharedClient(t *testing.T) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(testsvc.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newBase returns a unique lease name whose records are deleted after the
// test.
func newBase(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	base := "migrate:{" + testsvc.Prefix(t) + "}"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Second)
		defer cancel()
		_ = rdb.Del(ctx, takeoversKey(base), lastTakeoverKey(base), progressKey(base)).Err()
	})
	return base
}
