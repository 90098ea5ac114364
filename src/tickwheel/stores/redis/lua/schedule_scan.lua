-- schedule_scan.lua: page through a shard's schedules in id order.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)  KEYS[7] schedules  KEYS[8] schedule ids
-- ARGV[1] ZRANGEBYLEX bound to start from: '-' from the first, '(<id>' after <id>
-- ARGV[2] limit
-- returns: {id1, value1, id2, value2, ...}: at most ARGV[2] schedules; fewer when the shard has
--          no more
-- read-only; bounded by the limit
local ids = redis.call('ZRANGEBYLEX', SCHEDULE_IDS, ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))
if #ids == 0 then
  return {}
end
local values = redis.call('HMGET', SCHEDULES, unpack(ids))
local out = {}
for n, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = values[n]
end
return out
