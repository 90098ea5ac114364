-- heads.lua: the queues of this shard that may hold something to claim soonest (lib.lua HEADS).
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] horizon_ms  ARGV[2] how many  ARGV[3] since_ms, or -inf
-- returns: {queue1, ms1, queue2, ms2, ...}: the first ARGV[2] heads from ARGV[3] to ARGV[1],
--          earliest first, then the first head after ARGV[1] if any
-- A shard written before heads were kept gets them on the first call: each queue of the queues
-- set and of the lease batches has its head set, once (the work is bounded by those).
local BUILT = TAG .. ':hv'
if redis.call('EXISTS', BUILT) == 0 then
  for _, queue in ipairs(redis.call('SMEMBERS', QUEUES)) do
    set_head(queue)
  end
  for _, name in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do
    local queue = string.match(name, '^%d+|(.*)$')
    if queue then
      set_head(queue)
    end
  end
  redis.call('SET', BUILT, '1')
end
local found = redis.call('ZRANGEBYSCORE', HEADS, ARGV[3], ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
local next = redis.call('ZRANGEBYSCORE', HEADS, '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
found[#found + 1] = next[1]
found[#found + 1] = next[2]
return found
