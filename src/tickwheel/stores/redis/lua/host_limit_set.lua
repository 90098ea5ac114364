-- host_limit_set.lua: set (or with '' remove) the limit on callbacks to one host, keeping the
-- index of hosts that pages are read from in step with the hash.
-- KEYS[1] <p>:limits hash   KEYS[2] {<p>:limits}:hosts zset (score 0: hosts in byte order)
-- ARGV[1] host   ARGV[2] the limit as codec.encode_limit writes it, '' to remove it
-- returns: 1 when the host had a limit before, else 0
local had = redis.call('HEXISTS', KEYS[1], ARGV[1])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
end
return had
