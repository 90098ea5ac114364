-- purge.lua: delete done timers whose retention has ended.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] limit
-- returns: the number deleted; what is over the limit waits for the next call (readers
--          already treat those timers as gone)
local ids = redis.call('ZRANGEBYSCORE', EXPIRY, '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZREM', EXPIRY, id)
  unindex_id(id)
  redis.call('HDEL', RECORDS, id)
end
return #ids
