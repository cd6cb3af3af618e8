-- release.lua: compare-and-delete (SPEC §5 L3). Never touches another owner's lease.
-- KEYS[1] lease hash, KEYS[2] last-holder hash
-- ARGV[1] owner id, ARGV[2] token
-- Returns 1 when our lease was deleted, 0 when it was not ours (or absent).
local h = redis.call('HMGET', KEYS[1], 'owner', 'token')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then
  return 0
end
local t = redis.call('TIME')
local now = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'token', ARGV[2], 'renewed_ms', now, 'released', '1')
return 1
