-- host_limit_set.lua: set (or with '' remove) the limit on callbacks to one host, keeping the
-- index of hosts that pages are read from in step with the hash, counting a change in the
-- hash's version, and refusing a new host past a cap.
-- KEYS[1] <p>:limits hash   KEYS[2] {<p>:limits}:hosts zset (score 0: hosts in byte order)
-- KEYS[3] {<p>:limits}:v, the hash's version
-- ARGV[1] host   ARGV[2] the limit as codec.encode_limit writes it, '' to remove it
-- ARGV[3] most hosts the hash may hold, 0: any
-- returns: 1 when the host had a limit before, else 0; -1 if refused for the cap
local before = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == '' then
  if before then
    redis.call('HDEL', KEYS[1], ARGV[1])
    redis.call('ZREM', KEYS[2], ARGV[1])
    redis.call('INCR', KEYS[3])
    return 1
  end
  return 0
end
local cap = tonumber(ARGV[3])
if not before and cap > 0 and redis.call('HLEN', KEYS[1]) >= cap then
  return -1
end
if before ~= ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
  redis.call('INCR', KEYS[3])
end
if before then
  return 1
end
return 0
