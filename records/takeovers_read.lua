-- Reads a lease's takeover history: the number within the window and the
-- last takeover's record (false when none).
-- KEYS[1] takeovers, KEYS[2] last takeover's record; ARGV[1] window in ms
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[1]), '+inf')
return {n, redis.call('GET', KEYS[2])}
