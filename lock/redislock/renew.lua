-- renew.lua: owner-checked renewal (SPEC §5 L2). Never creates the lease.
-- KEYS[1] lease hash, KEYS[2] last-holder hash
-- ARGV[1] owner id, ARGV[2] token, ARGV[3] TTL in milliseconds
-- Returns 1 when renewed, 0 when the lease is absent or held by someone else.
local h = redis.call('HMGET', KEYS[1], 'owner', 'token')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then
  return 0
end
local t = redis.call('TIME')
local now = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('HSET', KEYS[1], 'renewed_ms', now)
redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'token', ARGV[2], 'renewed_ms', now, 'released', '0')
return 1
