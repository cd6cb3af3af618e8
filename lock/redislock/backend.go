// Package redislock is the Redis lock service (SPEC §5 L1–L5): a lease is a
// key with a PX TTL that only the Redis server expires.
//
// A lease lives under its base name, such as "migrate:{orders-move:public.orders:0}";
// the braces are a hash tag, so every key of one lease lands in one cluster
// slot. The backend derives these keys:
//
//	base:lease          hash {owner, token, renewed_ms, acquired_ms, prev_*} with a PX TTL
//	base:token          the fencing counter; no TTL, it only ever goes up
//	base:last           hash {owner, token, renewed_ms, released} of the most recent
//	                    holder; no TTL, so the next holder can measure how long it waited
//
// Every operation is one Lua script, run with the server's clock (TIME).
package redislock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/migrate-dev/migrate/lock"
)

// Client is what the backend needs from go-redis; *redis.Client,
// *redis.ClusterClient and *redis.Ring satisfy it. Give the client
// ContextTimeoutEnabled: true so a renewal call is bounded by the lease
// deadline on the socket too (the lease is cancelled on time either way).
type Client interface {
	redis.Scripter
	Ping(ctx context.Context) *redis.StatusCmd
	Close() error
}

// Backend is a lock.Backend on one Redis deployment.
type Backend struct {
	rdb  Client
	name string
	log  *slog.Logger
}

var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)
	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)
	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
	//go:embed inspect.lua
	inspectLua    string
	inspectScript = redis.NewScript(inspectLua)
	//go:embed raise.lua
	raiseLua    string
	raiseScript = redis.NewScript(raiseLua)
	//go:embed pttl.lua
	pttlLua    string
	pttlScript = redis.NewScript(pttlLua)
	// forgetScript deletes a lease's keys unless it is held.
	forgetScript = redis.NewScript(`if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3]) return 1`)
)

// New is a Backend on rdb; name describes it in messages (a redacted URL).
// The Backend owns rdb: Close closes it.
func New(rdb Client, name string, log *slog.Logger) *Backend {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Backend{rdb: rdb, name: name, log: log}
}

// LeaseKey, TokenKey and LastKey are the Redis keys of the lease named base.
func LeaseKey(base string) string { return base + ":lease" }
func TokenKey(base string) string { return base + ":token" }
func LastKey(base string) string  { return base + ":last" }

// String implements lock.Backend.
func (b *Backend) String() string { return b.name }

// Ping implements lock.Backend.
func (b *Backend) Ping(ctx context.Context) error { return b.rdb.Ping(ctx).Err() }

// Close implements lock.Backend.
func (b *Backend) Close() error { return b.rdb.Close() }

// MaxWait implements lock.Backend: the server deletes the key TTL after the
// last renewal, and a standby asks for its PTTL at most every poll.
func (b *Backend) MaxWait(ttl, poll time.Duration) time.Duration { return ttl + poll }

// Acquire implements lock.Backend with acquire.lua.
func (b *Backend) Acquire(ctx context.Context, base, owner string, ttl time.Duration) (lock.Grant, error) {
	keys := []string{LeaseKey(base), TokenKey(base), LastKey(base)}
	res, err := acquireScript.Run(ctx, b.rdb, keys, owner, ttl.Milliseconds()).Slice()
	if err != nil {
		return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", base, err)
	}
	if len(res) != 8 {
		return lock.Grant{}, fmt.Errorf("lock: acquire %s: unexpected reply %v", base, res)
	}
	g := lock.Grant{Status: lock.Status(asInt(res[0])), Owner: asString(res[1]), Token: asInt(res[2])}
	if g.Status == lock.Held {
		g.TTL = time.Duration(max(asInt(res[3]), 0)) * time.Millisecond // -1 (no TTL) reads as 0
		return g, nil
	}
	g.At = asTime(res[3])
	g.Prev = lock.Holder{Owner: asString(res[4]), Token: asInt(res[5]), RenewedAt: asTime(res[6]), Released: asString(res[7]) == "1"}
	if !g.Prev.RenewedAt.IsZero() {
		g.Wait = g.At.Sub(g.Prev.RenewedAt)
	}
	return g, nil
}

// Renew implements lock.Backend with renew.lua.
func (b *Backend) Renew(ctx context.Context, base, owner string, token int64, ttl time.Duration) (bool, error) {
	keys := []string{LeaseKey(base), LastKey(base)}
	n, err := renewScript.Run(ctx, b.rdb, keys, owner, token, ttl.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("lock: renew %s: %w", base, err)
	}
	return n == 1, nil
}

// Release implements lock.Backend with release.lua.
func (b *Backend) Release(ctx context.Context, base, owner string, token int64) (bool, error) {
	keys := []string{LeaseKey(base), LastKey(base)}
	n, err := releaseScript.Run(ctx, b.rdb, keys, owner, token).Int64()
	if err != nil {
		return false, fmt.Errorf("lock: release %s: %w", base, err)
	}
	return n == 1, nil
}

// Inspect implements lock.Backend with inspect.lua: one consistent read.
func (b *Backend) Inspect(ctx context.Context, base string) (lock.Info, error) {
	keys := []string{LeaseKey(base), TokenKey(base), LastKey(base)}
	res, err := inspectScript.Run(ctx, b.rdb, keys).Slice()
	if err != nil {
		return lock.Info{}, fmt.Errorf("lock: inspect %s: %w", base, err)
	}
	if len(res) != 9 {
		return lock.Info{}, fmt.Errorf("lock: inspect %s: unexpected reply %v", base, res)
	}
	info := lock.Info{Last: lock.Holder{Owner: asString(res[5]), Token: asInt(res[6]), RenewedAt: asTime(res[7]), Released: asString(res[8]) == "1"}}
	if pttl := asInt(res[2]); pttl != -2 {
		info.Held = true
		info.Owner, info.Token, info.RenewedAt = asString(res[0]), asInt(res[1]), asTime(res[3])
		if pttl > 0 {
			info.TTL = time.Duration(pttl) * time.Millisecond
		}
	}
	return info, nil
}

// Counter reads the fencing counter of base: the last token issued (0 if
// none). Tests read it; the runner never needs it.
func (b *Backend) Counter(ctx context.Context, base string) (int64, error) {
	res, err := inspectScript.Run(ctx, b.rdb, []string{LeaseKey(base), TokenKey(base), LastKey(base)}).Slice()
	if err != nil || len(res) != 9 {
		return 0, errors.Join(err, fmt.Errorf("lock: read the counter of %s", base))
	}
	return asInt(res[4]), nil
}

// Raise implements lock.Backend with raise.lua: counter = max(counter, atLeast).
func (b *Backend) Raise(ctx context.Context, base string, atLeast int64) error {
	if err := raiseScript.Run(ctx, b.rdb, []string{TokenKey(base)}, atLeast).Err(); err != nil {
		return fmt.Errorf("lock: raise token of %s to %d: %w", base, atLeast, err)
	}
	return nil
}

// WaitFree implements lock.Backend: it polls the lease's PTTL (L5).
func (b *Backend) WaitFree(ctx context.Context, base, _ string, poll time.Duration) error {
	return lock.PollFree(ctx, base, poll, b.log, func(ctx context.Context) (time.Duration, bool, error) {
		pttl, err := pttlScript.Run(ctx, b.rdb, []string{LeaseKey(base)}).Int64()
		switch {
		case err != nil:
			return 0, false, err
		case pttl == -2: // no key
			return 0, false, nil
		case pttl == -1: // a key with no expiry
			return 0, true, nil
		}
		// 0 is the key's last millisecond, not "no expiry": look again
		// in a millisecond, not a whole poll later.
		return time.Duration(max(pttl, 1)) * time.Millisecond, true, nil
	})
}

// Forget implements lock.Backend.
func (b *Backend) Forget(ctx context.Context, base string) error {
	n, err := forgetScript.Run(ctx, b.rdb, []string{LeaseKey(base), TokenKey(base), LastKey(base)}).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("lock: forget %s: %w", base, err)
	case n == 0:
		return fmt.Errorf("lock: forget %s: %w", base, lock.ErrHeld)
	}
	return nil
}

// asInt decodes an integer that Lua returned as a number or a string; "" is 0.
func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func asString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// asTime decodes Unix milliseconds; "" (never recorded) is the zero time.
func asTime(v any) time.Time {
	if ms := asInt(v); ms > 0 {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}

var _ lock.Backend = (*Backend)(nil)
