package lock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Info is a snapshot of one lease, read in one script.
type Info struct {
	Held      bool          // a lease exists on the server
	Owner     string        // holder's owner id (Held only)
	Token     int64         // holder's fencing token (Held only)
	TTL       time.Duration // remaining lease time on the server (Held only)
	RenewedAt time.Time     // server time of the holder's last renewal (Held only)
	Counter   int64         // fencing counter: the last token issued (0 if none)
	Last      Holder        // most recent holder, current or past (zero if none)
}

// Inspect reads the state of the lease named base, for status output and
// standbys. It never changes anything.
func (l *Locker) Inspect(ctx context.Context, base string) (Info, error) {
	if err := checkBase(base); err != nil {
		return Info{}, err
	}
	keys := []string{leaseKey(base), tokenKey(base), lastKey(base)}
	res, err := inspectScript.Run(ctx, l.rdb, keys).Slice()
	if err != nil {
		return Info{}, fmt.Errorf("lock: inspect %s: %w", base, err)
	}
	if len(res) != 9 {
		return Info{}, fmt.Errorf("lock: inspect %s: unexpected reply %v", base, res)
	}
	info := Info{
		Counter: asInt(res[4]),
		Last:    Holder{Owner: asString(res[5]), Token: asInt(res[6]), RenewedAt: asTime(res[7]), Released: asString(res[8]) == "1"},
	}
	if pttl := asInt(res[2]); pttl != -2 {
		info.Held = true
		info.Owner, info.Token, info.RenewedAt = asString(res[0]), asInt(res[1]), asTime(res[3])
		if pttl > 0 {
			info.TTL = time.Duration(pttl) * time.Millisecond
		}
	}
	return info, nil
}

// RaiseToken makes the fencing counter at least atLeast, atomically, so the
// next grant's token is above it (L4: after Redis lost its data, raise it to
// the target's watermark). It never lowers the counter.
func (l *Locker) RaiseToken(ctx context.Context, base string, atLeast int64) error {
	if err := checkBase(base); err != nil {
		return err
	}
	if atLeast < 0 {
		return fmt.Errorf("lock: raise token of %s: negative value %d", base, atLeast)
	}
	if err := raiseScript.Run(ctx, l.rdb, []string{tokenKey(base)}, atLeast).Err(); err != nil {
		return fmt.Errorf("lock: raise token of %s to %d: %w", base, atLeast, err)
	}
	return nil
}

// WaitFree blocks until the lease named base is absent on the Redis server
// (L5). It asks the server for the remaining TTL and sleeps the shorter of
// that and PollEvery ±20% jitter (capped at TTL/10); it never decides by its own clock that the
// lease is free. Redis errors are logged and polling goes on; it returns nil
// when the lease is absent, or the context's error.
func (l *Locker) WaitFree(ctx context.Context, base string) error {
	if err := checkBase(base); err != nil {
		return err
	}
	for {
		pttl, err := pttlScript.Run(ctx, l.rdb, []string{leaseKey(base)}).Int64()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sleep := min(jitter(l.opts.PollEvery), l.opts.TTL/10) // L5: never above TTL/10
		switch {
		case err != nil:
			l.log.WarnContext(ctx, "lease poll failed", attrKey, base, attrErr, err)
		case pttl == -2:
			return nil
		case pttl > 0:
			sleep = max(min(sleep, time.Duration(pttl)*time.Millisecond), time.Millisecond)
		default: // -1: a lease without TTL is not ours to fix (L3); keep waiting
			l.log.WarnContext(ctx, "lease has no TTL", attrKey, base)
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// jitter returns d ±20%.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + time.Duration(rand.Int64N(int64(2*d/5)+1))
}
