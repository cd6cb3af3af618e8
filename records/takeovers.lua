-- Records a takeover of a lease, and returns how many happened within the
-- window, this one included. With an empty token it only replaces the last
-- takeover's record.
-- KEYS[1] takeovers (sorted set: token by server time in ms)
-- KEYS[2] last takeover's record
-- ARGV[1] token, ARGV[2] window in ms, ARGV[3] record, ARGV[4] record ttl in ms
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
if ARGV[1] ~= '' then
  redis.call('ZADD', KEYS[1], now, ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('PEXPIRE', KEYS[1], window)
redis.call('SET', KEYS[2], ARGV[3], 'PX', tonumber(ARGV[4]))
return redis.call('ZCARD', KEYS[1])
