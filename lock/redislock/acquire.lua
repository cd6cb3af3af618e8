-- acquire.lua: grant the lease if it is free (SPEC §5 L1), in one atomic step.
-- KEYS[1] lease hash (PX TTL), KEYS[2] fencing counter (no TTL), KEYS[3] last-holder hash (no TTL)
-- ARGV[1] owner id, ARGV[2] TTL in milliseconds
-- Returns {status, owner, token, pttl_or_acquired_ms, prev_owner, prev_token, prev_renewed_ms, prev_released}
-- status 1: granted now; 2: already ours (a retried call), the stored grant is returned; 0: held by another owner.
local t = redis.call('TIME')
local now = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))

if redis.call('EXISTS', KEYS[1]) == 0 then
  local token = redis.call('INCR', KEYS[2])
  local prev = redis.call('HMGET', KEYS[3], 'owner', 'token', 'renewed_ms', 'released')
  local p = {prev[1] or '', prev[2] or '', prev[3] or '', prev[4] or ''}
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token, 'renewed_ms', now, 'acquired_ms', now,
    'prev_owner', p[1], 'prev_token', p[2], 'prev_renewed_ms', p[3], 'prev_released', p[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('DEL', KEYS[3])
  redis.call('HSET', KEYS[3], 'owner', ARGV[1], 'token', token, 'renewed_ms', now, 'released', '0')
  return {1, ARGV[1], token, now, p[1], p[2], p[3], p[4]}
end

local cur = redis.call('HGET', KEYS[1], 'owner') or ''
if cur == ARGV[1] then
  -- The same owner retried (go-redis resends a script after a timeout): no second INCR.
  local h = redis.call('HMGET', KEYS[1], 'token', 'acquired_ms', 'prev_owner', 'prev_token', 'prev_renewed_ms', 'prev_released')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('HSET', KEYS[1], 'renewed_ms', now)
  redis.call('HSET', KEYS[3], 'owner', ARGV[1], 'token', h[1], 'renewed_ms', now, 'released', '0')
  return {2, ARGV[1], tonumber(h[1]), h[2], h[3] or '', h[4] or '', h[5] or '', h[6] or ''}
end

local token = redis.call('HGET', KEYS[1], 'token')
return {0, cur, tonumber(token) or 0, redis.call('PTTL', KEYS[1]), '', '', '', ''}
