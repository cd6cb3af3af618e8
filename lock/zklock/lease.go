package zklock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/migrate-dev/migrate/lock"
)

// Acquire implements lock.Backend. Owner's queue node is the one WaitFree
// left, or a new one. When it is the first in the queue, the lease is
// granted (grant); when not, the node is deleted — a node stays queued
// only while its instance holds the lease or waits in WaitFree, so a busy
// instance never holds up the queue — and the first node's owner holds
// it (TTL 0: ZooKeeper cannot tell how long its session has left). The
// same owner acquiring again while it holds the lease gets its grant
// back (Retried).
func (b *Backend) Acquire(ctx context.Context, base, owner string, ttl time.Duration) (lock.Grant, error) {
	if t := b.timeout(); t < ttl {
		return lock.Grant{}, fmt.Errorf("lock: acquire %s: the session timeout %v is below the lease TTL %v (the servers' maxSessionTimeout)", base, t, ttl)
	}
	k, p := key{base, owner}, b.paths(base)
	if e := b.entryOf(k); e != nil && e.granted {
		ok, err := b.Renew(ctx, base, owner, e.grant.Token, ttl)
		if err != nil {
			return lock.Grant{}, fmt.Errorf("lock: acquire %s again: %w", base, err)
		}
		if ok {
			g := e.grant
			g.Status = lock.Retried
			return g, nil
		}
	}
	var node string
	if e := b.entryOf(k); e != nil && !e.granted && b.drop(k, e) {
		node = e.node
	} else {
		var err error
		if node, err = b.enqueue(ctx, p, owner); err != nil {
			return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", base, err)
		}
	}
	g, err := b.take(ctx, k, p, node, b.sighted(k), ttl)
	if err != nil {
		return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", base, err)
	}
	if g.Status != lock.Held {
		b.sight(k, sighting{})
	}
	return g, nil
}

// take grants the lease to owner's queue node name if it is the first,
// and deletes it if it is not. On an error the node it was working on is
// deleted too: a node no caller knows of would hold up the queue until
// the session ends.
func (b *Backend) take(ctx context.Context, k key, p paths, name string, seen sighting, ttl time.Duration) (g lock.Grant, err error) {
	defer func() {
		if err != nil && name != "" {
			b.remove(ctx, p, name)
		}
	}()
	requeued := false
	for {
		kids, _, err := b.queue(ctx, p)
		if err != nil {
			return lock.Grant{}, err
		}
		if !slices.Contains(kids, name) {
			// Gone: the session expired since it was queued (a place
			// WaitFree left, long ago), or an operator deleted it.
			if requeued {
				return lock.Grant{}, errVanished
			}
			requeued = true
			if name, err = b.enqueue(ctx, p, k.owner); err != nil {
				return lock.Grant{}, err
			}
			continue
		}
		if kids[0] == name {
			return b.grant(ctx, k, p, name, seen, ttl)
		}
		rec, _, err := b.readLast(ctx, p)
		if err != nil {
			return lock.Grant{}, err
		}
		q, stat, token, err := b.holderOf(ctx, p, kids[0], rec)
		if errors.Is(err, zk.ErrNoNode) {
			continue // the first one just went: look again
		}
		if err != nil {
			return lock.Grant{}, err
		}
		s, err := b.current()
		if err != nil {
			return lock.Grant{}, err
		}
		if q.Owner == k.owner && stat.EphemeralOwner == s.id() {
			// The first node is this owner's too, from an earlier call
			// whose reply was lost: its lease if it was granted, else a
			// leftover to delete. A lease this process gave up (expired
			// here, its node being deleted) is a leftover too: granted
			// again, it would vanish under its new holder.
			if rec.Node != kids[0] || rec.Released || b.isDeleting(p.node(kids[0])) {
				b.remove(ctx, p, kids[0])
				continue
			}
			b.remove(ctx, p, name)
			name = kids[0]
			return b.grant(ctx, k, p, name, seen, ttl)
		}
		b.remove(ctx, p, name)
		name = ""
		// Owner's other nodes, if any, are leftovers of creates whose
		// replies were lost: they would hold up the queue. Best effort.
		_, _ = b.leftovers(ctx, p, kids, k.owner, "")
		return lock.Grant{Status: lock.Held, Owner: q.Owner, Token: token}, nil
	}
}

// grant writes owner, holding the queue's first node name, into last,
// with its token: offset + the node's creation zxid (czxid), in one
// transaction (multi) that holds only if the node still exists and the
// offset is the one read.
//
// Why every token is above every token granted before for the lease: let
// A be granted by a transaction that found A's node present, and B
// granted after it. Zxids order the ensemble's transactions, across
// leader changes (the epoch is their high bits). B's node was first only
// after A's was deleted, which came after A's grant. Had B's node been
// created before A's, it would have had the lower sequence number and
// been gone already when A found itself first (a node is never granted
// once deleted). So B's node was created after A's, with a higher czxid;
// and B's offset, checked at B's grant, is at least A's, as Raise never
// lowers it (Forget, which deletes it, runs only on an empty queue). A
// counter incremented after the grant would not do: a holder whose
// session expired between its grant and the increment — its node gone,
// its successor granted and counted meanwhile — could end with the
// larger token and fence out its successor; here that grant's
// transaction fails, as the node it checks is gone. Raise sets the
// offset so that every node that can still be granted gets a token above
// the watermark; a grant after it reads that offset, or its check fails.
//
// If last already names the node (a grant whose reply was lost), the
// stored grant comes back as Retried.
func (b *Backend) grant(ctx context.Context, k key, p paths, name string, seen sighting, ttl time.Duration) (lock.Grant, error) {
	path := p.node(name)
	for {
		rec, lstat, err := b.readLast(ctx, p)
		if err != nil {
			return lock.Grant{}, err
		}
		nd, err := b.get(ctx, path)
		if errors.Is(err, zk.ErrNoNode) {
			return lock.Grant{}, errVanished
		}
		if err != nil {
			return lock.Grant{}, err
		}
		if rec.Node == name && !rec.Released {
			g := lock.Grant{Status: lock.Retried, Owner: k.owner, Token: rec.Token, At: time.UnixMilli(lstat.Mtime), Prev: rec.prev()}
			b.keep(k, p, &entry{node: name, session: nd.stat.EphemeralOwner, granted: true, grant: g}, ttl)
			return g, nil
		}
		off, ostat, err := b.readOffset(ctx, p)
		if err != nil {
			return lock.Grant{}, err
		}
		token := off + nd.stat.Czxid
		if rec.Owner != "" && rec.Token >= token {
			return lock.Grant{}, fmt.Errorf("token %d would not be above the last holder's %d", token, rec.Token)
		}
		next, _ := json.Marshal(lastData{Owner: k.owner, Node: name, Token: token,
			PrevOwner: rec.Owner, PrevToken: rec.Token, PrevReleased: rec.Released})
		res, err := call(ctx, b, func(c *zk.Conn) ([]zk.MultiResponse, error) {
			return c.Multi(&zk.CheckVersionRequest{Path: path, Version: nd.stat.Version},
				&zk.CheckVersionRequest{Path: p.offset, Version: ostat.Version},
				&zk.SetDataRequest{Path: p.last, Data: next, Version: lstat.Version})
		}, func(s *session, _ []zk.MultiResponse) { b.deleteLater(s, path, nd.stat.EphemeralOwner) }) // granted to a caller that gave up
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			continue // last or offset changed meanwhile: read them again
		case errors.Is(err, zk.ErrNoNode):
			return lock.Grant{}, errVanished
		case err != nil:
			return lock.Grant{}, err
		}
		g := lock.Grant{Status: lock.Granted, Owner: k.owner, Token: token, At: time.UnixMilli(res[2].Stat.Mtime), Prev: rec.holder()}
		if rec.Owner != "" && !rec.Released && seen.node == rec.Node {
			// An estimate: the holder's session ended between its timeout
			// and one server tick after the server last heard from it;
			// the standby saw its node go a moment after that.
			g.Wait = seen.timeout + time.Since(seen.at)
		}
		b.keep(k, p, &entry{node: name, session: nd.stat.EphemeralOwner, granted: true, grant: g}, ttl)
		return g, nil
	}
}

// held is this process's entry of the lease granted to k with token, if
// its session is still the current one; nil if not (an entry of an
// earlier session is dropped: its nodes went with it).
func (b *Backend) held(k key, token int64) (*entry, error) {
	e := b.entryOf(k)
	if e == nil || !e.granted || e.grant.Token != token {
		return nil, nil
	}
	s, err := b.current()
	if err != nil {
		return nil, err
	}
	if s.id() != e.session {
		b.drop(k, e)
		return nil, nil
	}
	return e, nil
}

// Renew implements lock.Backend (L2): the lease's node still exists and
// belongs to this session, read after a sync with the leader. A node gone, or a session that expired (every
// node of it is gone), is final: false. A connection lost is an error,
// not a loss: the holder's local deadline decides.
func (b *Backend) Renew(ctx context.Context, base, owner string, token int64, ttl time.Duration) (bool, error) {
	k := key{base, owner}
	e, err := b.held(k, token)
	if err != nil {
		return false, fmt.Errorf("lock: renew %s: %w", base, err)
	}
	if e == nil {
		return false, nil
	}
	p := b.paths(base)
	stat, err := call(ctx, b, func(c *zk.Conn) (*zk.Stat, error) {
		// A follower answers reads from its own state, which a follower
		// cut off from the leader keeps serving until it notices (its
		// syncLimit): the holder's node there, long after the leader
		// expired the session and granted the lease on. A sync first
		// makes the read see every write the leader committed before;
		// a follower that cannot reach the leader never answers it.
		if _, err := c.Sync(p.node(e.node)); err != nil {
			return nil, err
		}
		ok, stat, err := c.Exists(p.node(e.node))
		if !ok {
			stat = nil
		}
		return stat, err
	}, nil)
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		b.drop(k, e)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock: renew %s: %w", base, err)
	case stat == nil || stat.EphemeralOwner != e.session:
		b.drop(k, e)
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nodes[k] != e { // its timer deleted it meanwhile
		return false, nil
	}
	e.timer.Reset(ttl)
	return true, nil
}

// Release implements lock.Backend (L3): it deletes the lease's node if it
// is still this session's and marks last released, in one transaction.
func (b *Backend) Release(ctx context.Context, base, owner string, token int64) (bool, error) {
	k := key{base, owner}
	e, err := b.held(k, token)
	if err != nil {
		return false, fmt.Errorf("lock: release %s: %w", base, err)
	}
	if e == nil {
		return false, nil
	}
	p := b.paths(base)
	for {
		rec, lstat, err := b.readLast(ctx, p)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return false, fmt.Errorf("lock: release %s: %w", base, err)
		}
		ops := []any{&zk.DeleteRequest{Path: p.node(e.node), Version: -1}}
		if err == nil && rec.Node == e.node {
			rec.Released = true
			v, _ := json.Marshal(rec)
			ops = append(ops, &zk.SetDataRequest{Path: p.last, Data: v, Version: lstat.Version})
		}
		_, err = call(ctx, b, func(c *zk.Conn) ([]zk.MultiResponse, error) { return c.Multi(ops...) }, nil)
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			continue
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
			b.drop(k, e)
			return false, nil
		case err != nil:
			// Still this process's lease on the server: its timer deletes
			// the node unless a retry does first.
			return false, fmt.Errorf("lock: release %s: %w", base, err)
		}
		b.drop(k, e)
		return true, nil
	}
}
