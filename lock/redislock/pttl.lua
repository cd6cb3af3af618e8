-- pttl.lua: the server's remaining lease time in milliseconds (-2: no lease, -1: no TTL).
-- KEYS[1] lease hash
return redis.call('PTTL', KEYS[1])
