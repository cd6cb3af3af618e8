package zklock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/migrate-dev/migrate/internal/retry"
	"github.com/migrate-dev/migrate/lock"
)

// WaitFree implements lock.Backend (L5): owner queues a node (or keeps the
// one an earlier WaitFree left) and returns when it is the first, leaving
// the node for Acquire. Meanwhile it watches only the node just before
// its own, so a holder's end wakes the next in line and no one else; it
// also reads the queue again every poll (jittered), in case a watch was
// lost. Owner's other nodes in the queue of this session (a create whose
// reply the connection lost) are deleted: waiting behind one, owner
// would wait for itself. Service errors are logged and waited through,
// poll apart;
// when ctx ends, the node is deleted (in the background: WaitFree
// returns at once).
//
// When the node it watched was the holder's and the watch says it was
// deleted, it notes when: unless that holder released cleanly, the grant
// that follows reports as its Wait the holder's session timeout plus the
// time since then, on this process's monotonic clock. That is an
// estimate, and no more than the real wait: the server expires a session
// one timeout (up to a tick more) after it last heard from the client,
// and the holder's last renewal came no later than that.
func (b *Backend) WaitFree(ctx context.Context, base, owner string, poll time.Duration) (err error) {
	k, p := key{base, owner}, b.paths(base)
	var name string
	seen := b.sighted(k)
	if e := b.entryOf(k); e != nil && e.granted {
		return nil // owner holds it: Acquire gives it back
	} else if e != nil && b.drop(k, e) {
		name = e.node
	}
	defer func() {
		if err != nil && name != "" {
			if s, cerr := b.current(); cerr == nil {
				b.deleteLater(s, p.node(name), 0)
			}
		}
	}()
	// failed logs err and waits a poll; it returns an error when the
	// wait is over.
	failed := func(what string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errClosed) {
			return err
		}
		b.log.WarnContext(ctx, "lease wait: "+what+" failed", attrService, b.name, attrLease, base, attrErr, err)
		return retry.Sleep(ctx, lock.Jitter(poll))
	}
	var (
		watching      string          // the node watched, just before owner's
		events        <-chan zk.Event // its watch
		watched       queueData       // its data
		watchedHolder bool            // it was the first: the holder's
	)
	for {
		if name == "" {
			n, err := b.enqueue(ctx, p, owner)
			if err != nil {
				if err := failed("queueing", err); err != nil {
					return err
				}
				continue
			}
			name = n
		}
		kids, _, err := b.queue(ctx, p)
		if err == nil {
			var deleted bool
			if deleted, err = b.leftovers(ctx, p, kids, owner, name); deleted && err == nil {
				continue // read the queue again without them
			}
		}
		if err != nil {
			if err := failed("reading the queue", err); err != nil {
				return err
			}
			continue
		}
		if watchedHolder && watching != "" && !slices.Contains(kids, watching) {
			// The holder's node went and a poll, not its watch, woke
			// this wait: seen now, a moment late at most.
			seen = sighting{node: watching, at: time.Now(), timeout: time.Duration(watched.TimeoutMs) * time.Millisecond}
			watching = ""
		}
		i := slices.Index(kids, name)
		switch {
		case i < 0: // gone: the session expired, or an operator deleted it
			name = ""
			continue
		case i == 0:
			b.keep(k, p, &entry{node: name}, b.timeout())
			b.sight(k, seen)
			name = ""
			return nil
		}
		pred := kids[i-1]
		if pred != watching {
			type watch struct {
				q  queueData
				ch <-chan zk.Event
			}
			w, err := call(ctx, b, func(c *zk.Conn) (watch, error) {
				v, _, ch, err := c.GetW(p.node(pred))
				var q queueData
				_ = json.Unmarshal(v, &q)
				return watch{q, ch}, err
			}, nil)
			if errors.Is(err, zk.ErrNoNode) {
				continue // gone already: look again
			}
			if err != nil {
				if err := failed("watching the queue", err); err != nil {
					return err
				}
				continue
			}
			watching, events, watched, watchedHolder = pred, w.ch, w.q, i == 1
		}
		select {
		case ev := <-events:
			watching = "" // a watch fires once: set another
			b.mu.Lock()
			b.wakes++
			b.mu.Unlock()
			if watchedHolder && ev.Type == zk.EventNodeDeleted {
				seen = sighting{node: pred, at: time.Now(), timeout: time.Duration(watched.TimeoutMs) * time.Millisecond}
			}
		case <-time.After(lock.Jitter(poll)):
			// The watch is the fast way; a poll apart, the queue is read
			// again in case a watch was lost with a connection (a server
			// restarted under it), keeping the watch while the same node
			// is watched.
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Inspect implements lock.Backend: the queue's first node holds the
// lease; last is the most recent holder. ZooKeeper tells neither the time
// a session has left nor when it was last heard from: TTL and RenewedAt
// stay zero.
func (b *Backend) Inspect(ctx context.Context, base string) (lock.Info, error) {
	p := b.paths(base)
	for {
		rec, _, err := b.readLast(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			return lock.Info{}, nil
		}
		if err != nil {
			return lock.Info{}, fmt.Errorf("lock: inspect %s: %w", base, err)
		}
		var info lock.Info
		if rec.Owner != "" {
			info.Last = rec.holder()
		}
		kids, _, err := b.queue(ctx, p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return info, nil
		case err != nil:
			return lock.Info{}, fmt.Errorf("lock: inspect %s: %w", base, err)
		case len(kids) == 0:
			return info, nil
		}
		q, _, token, err := b.holderOf(ctx, p, kids[0], rec)
		if errors.Is(err, zk.ErrNoNode) {
			continue // the holder just went: look again
		}
		if err != nil {
			return lock.Info{}, fmt.Errorf("lock: inspect %s: %w", base, err)
		}
		info.Held, info.Owner, info.Token = true, q.Owner, token
		return info, nil
	}
}

// Raise implements lock.Backend (L4). Every node that may still be
// granted was created at or after floor, the creation zxid of the
// queue's first node (or, when the queue is empty, one after the last
// change to it): a server's view is a prefix of the ensemble's history,
// so a node it does not show yet was created after everything it shows.
// The offset becomes at least atLeast − floor + 1, compare-and-set on its
// version, so every later grant's token is above atLeast.
func (b *Backend) Raise(ctx context.Context, base string, atLeast int64) error {
	p := b.paths(base)
	for attempt := 0; ; attempt++ {
		kids, qstat, err := b.queue(ctx, p)
		var off int64
		var ostat *zk.Stat
		if err == nil {
			off, ostat, err = b.readOffset(ctx, p)
		}
		if errors.Is(err, zk.ErrNoNode) && attempt < 3 {
			if err := b.ensure(ctx, p); err != nil {
				return fmt.Errorf("lock: raise token of %s to %d: %w", base, atLeast, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("lock: raise token of %s to %d: %w", base, atLeast, err)
		}
		floor := qstat.Pzxid + 1
		if len(kids) > 0 {
			d, err := b.get(ctx, p.node(kids[0]))
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return fmt.Errorf("lock: raise token of %s to %d: %w", base, atLeast, err)
			}
			floor = min(floor, d.stat.Czxid)
		}
		want := atLeast - floor + 1
		if off >= want {
			return nil
		}
		_, err = call(ctx, b, func(c *zk.Conn) (*zk.Stat, error) {
			return c.Set(p.offset, []byte(strconv.FormatInt(want, 10)), ostat.Version)
		}, nil)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		if err != nil {
			return fmt.Errorf("lock: raise token of %s to %d: %w", base, atLeast, err)
		}
		return nil
	}
}

// Forget implements lock.Backend: it deletes the lease's nodes unless a
// queue node exists (a holder, or an instance waiting), in one
// transaction when they all exist.
func (b *Backend) Forget(ctx context.Context, base string) error {
	p := b.paths(base)
	kids, _, err := b.queue(ctx, p)
	switch {
	case errors.Is(err, zk.ErrNoNode):
	case err != nil:
		return fmt.Errorf("lock: forget %s: %w", base, err)
	case len(kids) > 0:
		return fmt.Errorf("lock: forget %s: %w", base, lock.ErrHeld)
	}
	del := func(paths ...string) error {
		_, err := call(ctx, b, func(c *zk.Conn) ([]zk.MultiResponse, error) {
			ops := make([]any, len(paths))
			for i, path := range paths {
				ops[i] = &zk.DeleteRequest{Path: path, Version: -1}
			}
			return c.Multi(ops...)
		}, nil)
		return err
	}
	all := []string{p.queue, p.last, p.offset, p.dir}
	err = del(all...)
	if errors.Is(err, zk.ErrNoNode) { // some are missing: one by one
		for _, path := range all {
			if err = del(path); err != nil && !errors.Is(err, zk.ErrNoNode) {
				break
			}
			err = nil
		}
	}
	switch {
	case errors.Is(err, zk.ErrNotEmpty):
		return fmt.Errorf("lock: forget %s: %w", base, lock.ErrHeld)
	case err != nil:
		return fmt.Errorf("lock: forget %s: %w", base, err)
	}
	return nil
}
