-- KEYS[1] progress hash; ARGV: ttl_ms, then field, value pairs.
-- Replaces the shard's progress record, kept for ttl_ms.
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
