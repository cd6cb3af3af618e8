package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Holder is a past holder of a lease, as recorded in base:last.
type Holder struct {
	Owner     string
	Token     int64
	RenewedAt time.Time // Redis server time of its last successful renewal (or of its release)
	Released  bool      // it released the lease cleanly
}

// grant is the decoded reply of acquire.lua.
type grant struct {
	status int64 // 0 held, 1 granted, 2 already ours
	owner  string
	token  int64
	at     time.Time     // grant time (status 1, 2)
	ttl    time.Duration // remaining TTL (status 0)
	prev   Holder
}

// Acquire takes the lease named base for owner if it is free (L1), and keeps
// it renewed (L2) until Release, loss, or the end of ctx. It returns a
// *HeldError (errors.Is ErrHeld) when another owner holds it.
//
// If owner already holds the lease (a retry after a timeout), the stored token
// is returned without a new one being issued.
//
// The lease's Context is derived from ctx: cancelling ctx stops the renewals
// and ends the lease locally (call Release to free it on the server at once),
// so pass the context of the work, not one with a short timeout for this call.
func (l *Locker) Acquire(ctx context.Context, base, owner string) (*Lease, error) {
	sent := time.Now()
	g, err := l.acquire(ctx, base, owner)
	if err != nil {
		return nil, err
	}
	if g.status == 0 {
		return nil, &HeldError{Key: base, Owner: g.owner, Token: g.token, TTL: g.ttl}
	}
	le := l.start(ctx, base, owner, g, sent)
	l.log.InfoContext(ctx, "lease acquired", attrKey, base, attrOwner, owner, attrToken, g.token,
		"previous_owner", g.prev.Owner, "wait", le.Wait(), "retried", g.status == 2)
	return le, nil
}

// acquire runs acquire.lua once; it starts no renewal.
func (l *Locker) acquire(ctx context.Context, base, owner string) (grant, error) {
	if err := checkBase(base); err != nil {
		return grant{}, err
	}
	if owner == "" {
		return grant{}, errors.New("lock: empty owner id")
	}
	keys := []string{leaseKey(base), tokenKey(base), lastKey(base)}
	res, err := acquireScript.Run(ctx, l.rdb, keys, owner, l.opts.TTL.Milliseconds()).Slice()
	if err != nil {
		return grant{}, fmt.Errorf("lock: acquire %s: %w", base, err)
	}
	if len(res) != 8 {
		return grant{}, fmt.Errorf("lock: acquire %s: unexpected reply %v", base, res)
	}
	g := grant{status: asInt(res[0]), owner: asString(res[1]), token: asInt(res[2])}
	if g.status == 0 {
		g.ttl = time.Duration(max(asInt(res[3]), 0)) * time.Millisecond // -1 (no TTL) reads as 0
		return g, nil
	}
	g.at = asTime(res[3])
	g.prev = Holder{Owner: asString(res[4]), Token: asInt(res[5]), RenewedAt: asTime(res[6]), Released: asString(res[7]) == "1"}
	return g, nil
}

// renew runs renew.lua once: true when the lease is still ours and extended.
func (l *Locker) renew(ctx context.Context, base, owner string, token int64) (bool, error) {
	keys := []string{leaseKey(base), lastKey(base)}
	n, err := renewScript.Run(ctx, l.rdb, keys, owner, token, l.opts.TTL.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("lock: renew %s: %w", base, err)
	}
	return n == 1, nil
}

// release runs release.lua once: true when our lease was deleted.
func (l *Locker) release(ctx context.Context, base, owner string, token int64) (bool, error) {
	keys := []string{leaseKey(base), lastKey(base)}
	n, err := releaseScript.Run(ctx, l.rdb, keys, owner, token).Int64()
	if err != nil {
		return false, fmt.Errorf("lock: release %s: %w", base, err)
	}
	return n == 1, nil
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
