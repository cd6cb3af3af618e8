package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/migrate-dev/migrate/lock"
)

// state is one consistent read of the keys of a lease name.
type state struct {
	lease     *mvccpb.KeyValue // the lease key; nil when the lease is free
	value     leaseValue       // its value
	last      lock.Holder      // the most recent holder; zero when none
	lastRev   int64            // the last key's ModRevision; 0 when there is none
	offset    int64            // the L4 offset; 0 when there is none
	offsetRev int64            // the offset key's ModRevision; 0 when there is none
}

// token is the fencing token of the lease key's holder.
func (st state) token() int64 { return st.value.Offset + st.lease.CreateRevision }

// reads are the reads of the keys of k, in the order parse takes them.
func reads(k keys) []clientv3.Op {
	return []clientv3.Op{clientv3.OpGet(k.lease), clientv3.OpGet(k.last), clientv3.OpGet(k.offset)}
}

// read reads the keys of k in one transaction: one revision of all three.
func (b *Backend) read(ctx context.Context, k keys) (state, error) {
	resp, err := b.cli.Txn(ctx).Then(reads(k)...).Commit()
	if err != nil {
		return state{}, b.wrap(err)
	}
	return parse(k, resp.Responses)
}

// parse decodes the replies to reads(k).
func parse(k keys, rs []*etcdserverpb.ResponseOp) (state, error) {
	get := func(i int) *mvccpb.KeyValue {
		if kvs := rs[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
			return kvs[0]
		}
		return nil
	}
	var st state
	var err error
	if kv := get(0); kv != nil {
		if st.value, err = decodeLease(k.lease, kv.Value); err != nil {
			return state{}, err
		}
		st.lease = kv
	}
	if kv := get(1); kv != nil {
		if st.last, err = decodeLast(k.last, kv.Value, kv.ModRevision); err != nil {
			return state{}, err
		}
		st.lastRev = kv.ModRevision
	}
	if kv := get(2); kv != nil {
		if st.offset, err = decodeOffset(k.offset, kv.Value); err != nil {
			return state{}, err
		}
		st.offsetRev = kv.ModRevision
	}
	return st, nil
}

func decodeOffset(key string, v []byte) (int64, error) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("lock: etcd key %s holds no offset of ours", key)
	}
	return n, nil
}

// get reads one key; nil when it does not exist.
func (b *Backend) get(ctx context.Context, key string) (*mvccpb.KeyValue, error) {
	resp, err := b.cli.Get(ctx, key)
	if err != nil {
		return nil, b.wrap(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0], nil
}

// holder reads the lease key of base: nil when the lease is free.
func (b *Backend) holder(ctx context.Context, base string) (*mvccpb.KeyValue, leaseValue, error) {
	key := b.keys(base).lease
	kv, err := b.get(ctx, key)
	if err != nil || kv == nil {
		return nil, leaseValue{}, err
	}
	v, err := decodeLease(key, kv.Value)
	return kv, v, err
}

// Acquire implements lock.Backend (L1). It reads the lease's keys; when
// the lease is free it grants an etcd lease of ttl and, in one
// transaction, creates the lease key attached to it and records owner as
// the last holder — if the lease key still does not exist and neither the
// offset nor the last holder changed since the read; else the transaction
// reads the keys again, and it starts over. The token is the offset read
// plus the revision of that transaction. A held lease costs no etcd lease.
func (b *Backend) Acquire(ctx context.Context, base, owner string, ttl time.Duration) (lock.Grant, error) {
	ctx, done := b.bind(ctx)
	defer done()
	secs, err := wholeSeconds(ttl)
	if err != nil {
		return lock.Grant{}, err
	}
	k := b.keys(base)
	var id clientv3.LeaseID // granted here, revoked unless the key took it
	defer func() {
		if id != 0 {
			b.revoke(ctx, base, id)
		}
	}()
	st, err := b.read(ctx, k)
	for {
		if err != nil {
			return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", base, err)
		}
		if st.lease != nil {
			g, again, terr := b.taken(ctx, base, owner, st)
			if !again {
				return g, terr
			}
			st, err = b.read(ctx, k)
			continue
		}
		if id == 0 {
			if id, err = b.grant(ctx, secs); err != nil {
				return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", base, err)
			}
		}
		at := time.Now()
		wait := b.waited(base, st.last, at)
		v := leaseValue{Owner: owner, Offset: st.offset, Lease: int64(id), TTL: secs, At: at.UnixMilli(),
			Prev:   prevValue{Owner: st.last.Owner, Token: st.last.Token, Released: st.last.Released},
			WaitMs: wait.Milliseconds()}
		var resp *clientv3.TxnResponse
		resp, err = b.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(k.lease), "=", 0),
			clientv3.Compare(clientv3.ModRevision(k.offset), "=", st.offsetRev),
			clientv3.Compare(clientv3.ModRevision(k.last), "=", st.lastRev),
		).Then(
			clientv3.OpPut(k.lease, mustJSON(v), clientv3.WithLease(id)),
			clientv3.OpPut(k.last, mustJSON(lastValue{Owner: owner, Offset: st.offset})),
		).Else(reads(k)...).Commit()
		if err != nil {
			// Had the write gone through, the revoke takes the key too.
			return lock.Grant{}, fmt.Errorf("lock: acquire %s: %w", base, b.wrap(err))
		}
		if !resp.Succeeded {
			// A grant, a release or a raise came between.
			st, err = parse(k, resp.Responses)
			continue
		}
		rev := resp.Header.Revision // the lease key's CreateRevision
		b.hold(base, holding{owner: owner, token: st.offset + rev, lease: id, rev: rev})
		b.mu.Lock()
		delete(b.ended, base)
		b.mu.Unlock()
		id = 0
		return lock.Grant{Status: lock.Granted, Owner: owner, Token: st.offset + rev, At: at, Prev: st.last, Wait: wait}, nil
	}
}

// taken is the reply to an acquire by owner that found the lease key of
// base: who holds it, with its remaining time; or, when owner holds it (a
// retried call), the stored grant, renewed, since the caller's deadline
// runs from its request. again means the holder's etcd lease ended
// meanwhile: read again.
func (b *Backend) taken(ctx context.Context, base, owner string, st state) (g lock.Grant, again bool, err error) {
	v, token := st.value, st.token()
	id := clientv3.LeaseID(v.Lease)
	if v.Owner != owner {
		left, err := b.remaining(ctx, id)
		if err != nil {
			return lock.Grant{}, false, fmt.Errorf("lock: acquire %s: %w", base, err)
		}
		return lock.Grant{Status: lock.Held, Owner: v.Owner, Token: token, TTL: left}, false, nil
	}
	if _, err := b.cli.KeepAliveOnce(ctx, id); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return lock.Grant{}, true, nil
		}
		return lock.Grant{}, false, fmt.Errorf("lock: acquire %s again: %w", base, b.wrap(err))
	}
	b.hold(base, holding{owner: owner, token: token, lease: id, rev: st.lease.CreateRevision})
	return lock.Grant{
		Status: lock.Retried, Owner: owner, Token: token, At: time.UnixMilli(v.At),
		Prev: lock.Holder{Owner: v.Prev.Owner, Token: v.Prev.Token, Released: v.Prev.Released},
		Wait: time.Duration(v.WaitMs) * time.Millisecond,
	}, false, nil
}

// grant grants an etcd lease of secs seconds. etcd silently lengthens a
// lease shorter than its minimum (1.5 election timeouts, rounded up to a
// second): such a grant is revoked and refused, as the holder's deadline
// and the standbys' wait would both be wrong.
func (b *Backend) grant(ctx context.Context, secs int64) (clientv3.LeaseID, error) {
	resp, err := b.cli.Grant(ctx, secs)
	if err != nil {
		return 0, b.wrap(err)
	}
	if resp.TTL != secs {
		b.revoke(ctx, "", resp.ID)
		return 0, fmt.Errorf("%s grants leases of %ds at least (asked for %ds); use a lease_ttl of %ds or more", b.name, resp.TTL, secs, resp.TTL)
	}
	return resp.ID, nil
}

// revoke ends the etcd lease id, granted for base, and the key on it, if
// ctx allows; else the lease expires at its TTL.
func (b *Backend) revoke(ctx context.Context, base string, id clientv3.LeaseID) {
	if ctx.Err() != nil {
		return
	}
	if _, err := b.cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		b.log.WarnContext(ctx, "etcd lease not revoked; it expires at its TTL", attrLease, base, "etcd_lease", int64(id), attrErr, err)
	}
}

// remaining is the etcd lease's time left, in whole seconds rounded down
// (all etcd tells); 0 when it has ended.
func (b *Backend) remaining(ctx context.Context, id clientv3.LeaseID) (time.Duration, error) {
	resp, err := b.cli.TimeToLive(ctx, id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return 0, nil
	case err != nil:
		return 0, b.wrap(err)
	}
	return time.Duration(max(resp.TTL, 0)) * time.Second, nil
}

// Renew implements lock.Backend (L2): it keeps the grant's etcd lease
// alive (KeepAliveOnce, for the TTL it was granted), then checks that the
// lease key is still the grant's, as an operator may have deleted it.
// An etcd lease not found (expired, revoked) or a key gone is false.
func (b *Backend) Renew(ctx context.Context, base, owner string, token int64, _ time.Duration) (bool, error) {
	ctx, done := b.bind(ctx)
	defer done()
	h, ok := b.holding(base, owner, token)
	if !ok { // not granted through this backend: find its etcd lease
		kv, v, err := b.holder(ctx, base)
		if err != nil {
			return false, fmt.Errorf("lock: renew %s: %w", base, err)
		}
		if kv == nil || v.Owner != owner || v.Offset+kv.CreateRevision != token {
			return false, nil
		}
		h = holding{owner: owner, token: token, lease: clientv3.LeaseID(v.Lease), rev: kv.CreateRevision}
	}
	if _, err := b.cli.KeepAliveOnce(ctx, h.lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			b.unhold(base, token)
			return false, nil
		}
		return false, fmt.Errorf("lock: renew %s: %w", base, b.wrap(err))
	}
	kv, err := b.get(ctx, b.keys(base).lease)
	if err != nil {
		return false, fmt.Errorf("lock: renew %s: %w", base, err)
	}
	if kv == nil || kv.CreateRevision != h.rev || kv.Lease != int64(h.lease) {
		b.unhold(base, token)
		return false, nil
	}
	return true, nil
}

// Release implements lock.Backend (L3): in one transaction, it deletes
// the lease key if it is still the same key (its CreateRevision) and
// records the clean release as the last holder's; then it revokes the
// grant's etcd lease.
func (b *Backend) Release(ctx context.Context, base, owner string, token int64) (bool, error) {
	ctx, done := b.bind(ctx)
	defer done()
	k := b.keys(base)
	kv, v, err := b.holder(ctx, base)
	if err != nil {
		return false, fmt.Errorf("lock: release %s: %w", base, err)
	}
	if kv == nil || v.Owner != owner || v.Offset+kv.CreateRevision != token {
		b.unhold(base, token)
		return false, nil
	}
	resp, err := b.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(k.lease), "=", kv.CreateRevision),
	).Then(
		clientv3.OpDelete(k.lease),
		clientv3.OpPut(k.last, mustJSON(lastValue{Owner: owner, Token: token, Released: true})),
	).Commit()
	if err != nil {
		return false, fmt.Errorf("lock: release %s: %w", base, b.wrap(err))
	}
	b.unhold(base, token)
	if !resp.Succeeded {
		return false, nil // expired meanwhile
	}
	b.revoke(ctx, base, clientv3.LeaseID(v.Lease))
	return true, nil
}

// Raise implements lock.Backend (L4): offset = max(offset, atLeast), by
// compare-and-swap. Every later grant's token is then offset + a
// revision of at least 1, above atLeast.
func (b *Backend) Raise(ctx context.Context, base string, atLeast int64) error {
	ctx, done := b.bind(ctx)
	defer done()
	key := b.keys(base).offset
	for {
		kv, err := b.get(ctx, key)
		if err != nil {
			return fmt.Errorf("lock: raise token of %s to %d: %w", base, atLeast, err)
		}
		var cur, rev int64
		if kv != nil {
			if cur, err = decodeOffset(key, kv.Value); err != nil {
				return err
			}
			rev = kv.ModRevision
		}
		if cur >= atLeast {
			return nil
		}
		resp, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, strconv.FormatInt(atLeast, 10))).Commit()
		if err != nil {
			return fmt.Errorf("lock: raise token of %s to %d: %w", base, atLeast, b.wrap(err))
		}
		if resp.Succeeded {
			return nil
		}
	}
}

// Inspect implements lock.Backend: one read of the keys, and the etcd
// lease's remaining time (whole seconds) when the lease is held. etcd
// keeps no renewal times: RenewedAt stays zero.
func (b *Backend) Inspect(ctx context.Context, base string) (lock.Info, error) {
	ctx, done := b.bind(ctx)
	defer done()
	st, err := b.read(ctx, b.keys(base))
	if err != nil {
		return lock.Info{}, fmt.Errorf("lock: inspect %s: %w", base, err)
	}
	info := lock.Info{Last: st.last}
	if st.lease != nil {
		left, err := b.remaining(ctx, clientv3.LeaseID(st.value.Lease))
		if err != nil {
			return lock.Info{}, fmt.Errorf("lock: inspect %s: %w", base, err)
		}
		info.Held, info.Owner, info.Token, info.TTL = true, st.value.Owner, st.token(), left
	}
	return info, nil
}

// Forget implements lock.Backend: it deletes the last holder and the
// offset of base in one transaction, unless the lease key exists.
func (b *Backend) Forget(ctx context.Context, base string) error {
	ctx, done := b.bind(ctx)
	defer done()
	k := b.keys(base)
	resp, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.lease), "=", 0)).
		Then(clientv3.OpDelete(k.last), clientv3.OpDelete(k.offset)).Commit()
	switch {
	case err != nil:
		return fmt.Errorf("lock: forget %s: %w", base, b.wrap(err))
	case !resp.Succeeded:
		return fmt.Errorf("lock: forget %s: %w", base, lock.ErrHeld)
	}
	b.mu.Lock()
	delete(b.ended, base)
	delete(b.held, base)
	b.mu.Unlock()
	return nil
}
