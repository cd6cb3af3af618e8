package zklock

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/migrate-dev/migrate/lock"
)

// paths are the nodes of one lease.
type paths struct {
	base                     string // the lease's name
	dir, queue, last, offset string
}

// paths returns the nodes of the lease named base: '/' and every
// character a node name cannot hold are %-escaped.
func (b *Backend) paths(base string) paths {
	name := url.PathEscape(base)
	if name == "." || name == ".." {
		name = "%" + name // names ZooKeeper refuses; the escape never leaves a bare '%'
	}
	dir := b.prefix + "/" + name
	return paths{base: base, dir: dir, queue: dir + "/queue", last: dir + "/last", offset: dir + "/offset"}
}

// node is the path of the queue node name.
func (p paths) node(name string) string { return p.queue + "/" + name }

// queueData is what a queue node holds.
type queueData struct {
	Owner     string `json:"owner"`
	TimeoutMs int64  `json:"timeout_ms"` // its session's timeout
}

// lastData is what the last node holds: the most recent holder and the
// one before it.
type lastData struct {
	Owner        string `json:"owner"`
	Node         string `json:"node"` // its queue node's name
	Token        int64  `json:"token"`
	Released     bool   `json:"released"`
	PrevOwner    string `json:"prev_owner,omitempty"`
	PrevToken    int64  `json:"prev_token,omitempty"`
	PrevReleased bool   `json:"prev_released,omitempty"`
}

// holder is the Holder the record names.
func (r lastData) holder() lock.Holder {
	return lock.Holder{Owner: r.Owner, Token: r.Token, Released: r.Released}
}

func (r lastData) prev() lock.Holder {
	return lock.Holder{Owner: r.PrevOwner, Token: r.PrevToken, Released: r.PrevReleased}
}

// key names one owner's queue node of one lease in this process.
type key struct{ base, owner string }

// entry is a queue node of this process: a lease it was granted, or a
// place WaitFree left for Acquire. timer deletes the node when a lease
// was not renewed for its TTL, or a place not taken within a session
// timeout.
type entry struct {
	node    string     // its name in the queue
	session int64      // the session that created it (its ephemeral owner); 0 until granted
	granted bool       // a lease, not a place
	grant   lock.Grant // the lease's grant
	timer   *time.Timer
}

// sighting is a holder's node that WaitFree saw deleted; the grant that
// follows, to the same owner, measures its Wait from it.
type sighting struct {
	node    string        // its name
	at      time.Time     // when the watch told (monotonic)
	timeout time.Duration // its session's timeout
}

// seq is the sequence number of a queue node's name; false for a name
// that is not a queue node's.
func seq(name string) (int64, bool) {
	i := strings.LastIndexByte(name, '-')
	if !strings.HasPrefix(name, "n-") || i < 0 || len(name)-i-1 < 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 64)
	return n, err == nil
}

// bySeq orders queue node names by their sequence numbers.
func bySeq(a, b string) int {
	x, _ := seq(a)
	y, _ := seq(b)
	return cmp.Compare(x, y)
}

// queue lists the lease's queue in order, the holder first; stat is the
// queue node's.
func (b *Backend) queue(ctx context.Context, p paths) ([]string, *zk.Stat, error) {
	type listing struct {
		kids []string
		stat *zk.Stat
	}
	l, err := call(ctx, b, func(c *zk.Conn) (listing, error) {
		kids, stat, err := c.Children(p.queue)
		return listing{kids, stat}, err
	}, nil)
	if err != nil {
		return nil, nil, err
	}
	kids := slices.DeleteFunc(l.kids, func(n string) bool { _, ok := seq(n); return !ok })
	slices.SortFunc(kids, bySeq)
	return kids, l.stat, nil
}

type data struct {
	b    []byte
	stat *zk.Stat
}

// get reads a node.
func (b *Backend) get(ctx context.Context, path string) (data, error) {
	return call(ctx, b, func(c *zk.Conn) (data, error) {
		v, stat, err := c.Get(path)
		return data{v, stat}, err
	}, nil)
}

// readLast reads the last node; the zero record when it holds none.
func (b *Backend) readLast(ctx context.Context, p paths) (lastData, *zk.Stat, error) {
	d, err := b.get(ctx, p.last)
	if err != nil {
		return lastData{}, nil, err
	}
	var r lastData
	if len(d.b) > 0 {
		if err := json.Unmarshal(d.b, &r); err != nil {
			return lastData{}, nil, errors.New("unreadable " + p.last)
		}
	}
	return r, d.stat, nil
}

// readOffset reads the offset node.
func (b *Backend) readOffset(ctx context.Context, p paths) (int64, *zk.Stat, error) {
	d, err := b.get(ctx, p.offset)
	if err != nil {
		return 0, nil, err
	}
	if len(d.b) == 0 {
		return 0, d.stat, nil
	}
	n, err := strconv.ParseInt(string(d.b), 10, 64)
	if err != nil {
		return 0, nil, errors.New("unreadable " + p.offset)
	}
	return n, d.stat, nil
}

// holderOf reads the queue's first node, name, and tells whose it is and
// its token: the one it was granted (last names it), or, for a standby
// that WaitFree let through and that has not taken the lease yet, the one
// it would get.
func (b *Backend) holderOf(ctx context.Context, p paths, name string, rec lastData) (queueData, *zk.Stat, int64, error) {
	d, err := b.get(ctx, p.node(name))
	if err != nil {
		return queueData{}, nil, 0, err
	}
	var q queueData
	_ = json.Unmarshal(d.b, &q)
	if rec.Node == name && !rec.Released {
		return q, d.stat, rec.Token, nil
	}
	off, _, err := b.readOffset(ctx, p)
	if err != nil {
		return queueData{}, nil, 0, err
	}
	return q, d.stat, off + d.stat.Czxid, nil
}

// ensure creates the prefix and the lease's nodes where they are missing.
func (b *Backend) ensure(ctx context.Context, p paths) error {
	var todo []string
	for i := 1; i < len(b.prefix); i++ {
		if b.prefix[i] == '/' {
			todo = append(todo, b.prefix[:i])
		}
	}
	todo = append(todo, b.prefix, p.dir, p.queue, p.last, p.offset)
	for _, path := range todo {
		var v []byte
		if path == p.offset {
			v = []byte("0")
		}
		_, err := call(ctx, b, func(c *zk.Conn) (string, error) { return c.Create(path, v, zk.FlagPersistent, b.acl) }, nil)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// enqueue creates a queue node for owner, creating the lease's nodes when
// they are missing, and returns its name. A node created for a caller
// that gave up is deleted.
func (b *Backend) enqueue(ctx context.Context, p paths, owner string) (string, error) {
	v, _ := json.Marshal(queueData{Owner: owner, TimeoutMs: b.timeout().Milliseconds()})
	for attempt := 0; ; attempt++ {
		path, err := call(ctx, b, func(c *zk.Conn) (string, error) {
			return c.Create(p.node("n-"+url.PathEscape(owner)+"-"), v, zk.FlagEphemeralSequential, b.acl)
		}, func(s *session, path string) { b.deleteLater(s, path, 0) })
		if errors.Is(err, zk.ErrNoNode) && attempt < 3 {
			if err := b.ensure(ctx, p); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
		return path[strings.LastIndexByte(path, '/')+1:], nil
	}
}

// leftovers deletes owner's queue nodes in kids, other than keep, that
// this process's session created: nodes whose create the server carried
// out but whose reply the connection lost, which no caller knows of. Left
// in the queue, such a node would hold it up until the session ends —
// and the same owner's next place, just behind it, would wait for it for
// ever. It reports whether it deleted any.
func (b *Backend) leftovers(ctx context.Context, p paths, kids []string, owner, keep string) (bool, error) {
	prefix := "n-" + url.PathEscape(owner) + "-"
	deleted := false
	for _, name := range kids {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || name == keep || strings.Trim(rest, "0123456789") != "" {
			continue // another owner's ("n-a-b-…" is not owner a's), or the one kept
		}
		d, err := b.get(ctx, p.node(name))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return deleted, err
		}
		s, err := b.current()
		if err != nil {
			return deleted, err
		}
		if d.stat.EphemeralOwner != s.id() {
			continue // an ended session's: the server deletes it
		}
		b.log.Debug("zookeeper: deleting a queue node whose create's reply was lost", attrService, b.name, attrLease, p.base, attrOwner, owner, "node", name)
		b.remove(ctx, p, name)
		deleted = true
	}
	return deleted, nil
}

// remove deletes this process's queue node name: at once if it can, else
// in the background.
func (b *Backend) remove(ctx context.Context, p paths, name string) {
	s, err := b.current()
	if err != nil {
		return
	}
	_, err = call(ctx, b, func(c *zk.Conn) (struct{}, error) { return struct{}{}, c.Delete(p.node(name), -1) }, nil)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		b.deleteLater(s, p.node(name), 0)
	}
}

// sighted returns what WaitFree saw for k last.
func (b *Backend) sighted(k key) sighting {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sightings[k]
}

// sight records what WaitFree saw for k; the zero sighting forgets it.
func (b *Backend) sight(k key, s sighting) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.node == "" {
		delete(b.sightings, k)
	} else {
		b.sightings[k] = s
	}
}

// entryOf returns this process's entry for owner's node of base.
func (b *Backend) entryOf(k key) *entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nodes[k]
}

// keep records e under k, with a timer that deletes its node after d
// unless the entry is renewed, taken or dropped first.
func (b *Backend) keep(k key, p paths, e *entry, d time.Duration) {
	b.mu.Lock()
	old, s := b.nodes[k], b.s
	if old != nil {
		old.timer.Stop()
	}
	e.timer = time.AfterFunc(d, func() { b.expire(k, p, e) })
	b.nodes[k] = e
	if b.closed {
		e.timer.Stop()
	}
	b.mu.Unlock()
	if old != nil && old.node != e.node { // not expected: one node per owner and lease
		b.deleteLater(s, p.node(old.node), old.session)
	}
}

// drop forgets e; false when it was not k's entry any more.
func (b *Backend) drop(k key, e *entry) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nodes[k] != e {
		return false
	}
	e.timer.Stop()
	delete(b.nodes, k)
	return true
}

// expire is e's timer: its lease was not renewed for a TTL, or its place
// not taken by Acquire within a session timeout. The node goes, as the
// lease would on a service with TTLs.
func (b *Backend) expire(k key, p paths, e *entry) {
	if !b.drop(k, e) {
		return
	}
	b.mu.Lock()
	s := b.s
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return
	}
	what := "a place WaitFree left was not taken in time"
	if e.granted {
		what = "a lease was not renewed for its TTL"
	}
	b.log.Warn("zookeeper: "+what+"; deleting its node", attrService, b.name, attrLease, k.base, attrOwner, k.owner, "node", e.node)
	b.deleteLater(s, p.node(e.node), e.session)
}
