-- heads.lua: the queues of this shard that may hold something to claim soonest (lib.lua HEADS).
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] how many
-- returns: {queue1, ms1, queue2, ms2, ...}: the first ARGV[1] heads, earliest first
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
return redis.call('ZRANGEBYSCORE', HEADS, '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, ARGV[1])
