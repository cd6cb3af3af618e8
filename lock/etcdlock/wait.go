package etcdlock

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/migrate-dev/migrate/lock"
)

// minRead is the least time WaitFree gives one read of the lease key.
const minRead = time.Second

// WaitFree implements lock.Backend (L5). It reads the lease key; while
// the key exists, it watches it for its deletion from the revision read
// on, so the standby is told the moment etcd deletes it, which it does
// only when the holder releases it or its etcd lease expires. It reads
// again every poll (jittered), in case the watch broke unnoticed — a
// cluster that lost its data resumes it at a revision it will not reach
// for long — and watches anew when a watch ends (its member lost the
// leader, the connection broke). Errors are logged and waited through. It
// returns nil when the key is gone, ctx's error, or ErrClosed.
//
// etcd tells no time, so WaitFree notes, on the local monotonic clock,
// when it saw the holder's key go: the next grant on this backend
// estimates its wait from that (waited).
func (b *Backend) WaitFree(ctx context.Context, base, _ string, poll time.Duration) error {
	ctx, done := b.bind(ctx)
	defer done()
	key := b.keys(base).lease
	var (
		watch clientv3.WatchChan // nil: none yet, or it ended
		stop  = func() {}        // ends the watch
		seen  ending             // the holder last read; zero when none
	)
	defer func() { stop() }()
	for {
		rctx, cancel := context.WithTimeout(ctx, max(poll, minRead))
		kv, err := b.get(rctx, key)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ended(ctx)
		case err != nil:
			b.log.WarnContext(ctx, "lease poll failed", attrLease, base, attrErr, err)
		case kv == nil:
			if seen.owner != "" {
				b.noteEnded(base, seen)
			}
			return nil
		default:
			seen = endingOf(key, kv)
			if watch == nil {
				wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
				stop = cancel
				watch = b.cli.Watch(wctx, key, clientv3.WithRev(kv.ModRevision+1), clientv3.WithFilterPut(), clientv3.WithPrevKV())
			}
		}
		t := time.NewTimer(lock.Jitter(poll))
	wait:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return ended(ctx)
			case <-t.C:
				break wait
			case wr, ok := <-watch:
				if !ok || wr.Canceled || wr.Err() != nil {
					if ok && wr.Err() != nil {
						b.log.WarnContext(ctx, "lease watch ended", attrLease, base, attrErr, wr.Err())
					}
					stop()
					watch = nil // read again at the timer, and watch anew
					continue
				}
				for _, ev := range wr.Events {
					if ev.Type != mvccpb.DELETE {
						continue
					}
					t.Stop()
					if ev.PrevKv != nil {
						seen = endingOf(key, ev.PrevKv)
					}
					if seen.owner != "" {
						b.noteEnded(base, seen)
					}
					return nil
				}
			}
		}
	}
}

// ended is the error of a wait whose ctx ended: ErrClosed when the
// backend closed, else the caller's ctx's error.
func ended(ctx context.Context) error {
	if context.Cause(ctx) == ErrClosed {
		return ErrClosed
	}
	return ctx.Err()
}

// endingOf is the holder of a lease key; zero when the value is not ours.
func endingOf(key string, kv *mvccpb.KeyValue) ending {
	v, err := decodeLease(key, kv.Value)
	if err != nil {
		return ending{}
	}
	return ending{owner: v.Owner, token: v.Offset + kv.CreateRevision, ttl: time.Duration(v.TTL) * time.Second}
}

// noteEnded records that the key of e's grant of base was seen gone now.
func (b *Backend) noteEnded(base string, e ending) {
	e.seen = time.Now()
	b.mu.Lock()
	b.ended[base] = e
	b.mu.Unlock()
}

// waited estimates how long the lease of base stood unrenewed before a
// grant at at, after prev: 0 when there was no previous holder, when it
// released cleanly, or when this backend did not see its key go. Else
// prev's TTL plus the time since its key was seen gone. etcd deletes an
// expired key at least a TTL after the holder's last renewal (up to
// expiryCheck later, or a TTL and an election later across a leader
// change), so the estimate errs short, by how late the deletion was;
// after an operator deleted the key or revoked the etcd lease instead, it
// errs long, as the holder may have renewed just before.
func (b *Backend) waited(base string, prev lock.Holder, at time.Time) time.Duration {
	if prev.Owner == "" || prev.Released {
		return 0
	}
	b.mu.Lock()
	e, ok := b.ended[base]
	b.mu.Unlock()
	if !ok || e.owner != prev.Owner || e.token != prev.Token {
		return 0
	}
	return e.ttl + at.Sub(e.seen)
}
