-- inspect.lua: a consistent snapshot of one lease, its counter and its last holder.
-- KEYS[1] lease hash, KEYS[2] fencing counter, KEYS[3] last-holder hash
-- Returns {owner, token, pttl, renewed_ms, counter, last_owner, last_token, last_renewed_ms, last_released}
local h = redis.call('HMGET', KEYS[1], 'owner', 'token', 'renewed_ms')
local pttl = redis.call('PTTL', KEYS[1])
local counter = redis.call('GET', KEYS[2]) or ''
local last = redis.call('HMGET', KEYS[3], 'owner', 'token', 'renewed_ms', 'released')
return {h[1] or '', h[2] or '', pttl, h[3] or '', counter,
  last[1] or '', last[2] or '', last[3] or '', last[4] or ''}
