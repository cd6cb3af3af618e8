-- raise.lua: counter = max(counter, ARGV[1]) (SPEC §5 L4); never lowers it.
-- KEYS[1] fencing counter; ARGV[1] the lowest value the counter may hold afterwards
-- Returns the counter after the call.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[1])
if cur == nil then
  return redis.error_reply('lock: fencing counter is not an integer')
end
if want > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return want
end
return cur
