-- stats.lua: count the shard's timers per state and find its earliest scheduled due time.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms
-- returns: {scheduled, leased, done, dead, earliest due ms or ''}; done past retention not counted
-- read-only; visits one bucket per queue that has scheduled timers here. Each leased timer has
-- one lease entry, each done timer one expiry entry, each dead one a dead-letter entry; the
-- rest of the records are scheduled.
local leased = redis.call('ZCARD', LEASES)
local done = redis.call('ZCARD', EXPIRY)
local dead = redis.call('ZCARD', DEAD_SET)
local counts = { redis.call('HLEN', RECORDS) - leased - done - dead, leased,
                 done - redis.call('ZCOUNT', EXPIRY, '-inf', ARGV[1]), dead }
local soonest = nil
for _, queue in ipairs(redis.call('SMEMBERS', QUEUES)) do
  local first = earliest(queue)
  if first and (soonest == nil or first < soonest) then
    soonest = first
  end
end
counts[5] = soonest and int(soonest) or ''
return counts
