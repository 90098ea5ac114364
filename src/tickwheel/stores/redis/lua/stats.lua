-- stats.lua: count the shard's timers per state and find its earliest scheduled due time.
-- KEYS[1..8] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms
-- returns: {scheduled, leased, done, dead, earliest due ms or ''}; done past retention not counted
-- read-only; visits one bucket per queue that has scheduled timers here
local counts = {}
for i, state in ipairs({ SCHEDULED, LEASED, DONE, DEAD }) do
  counts[i] = redis.call('ZCARD', STATE_SET[state])
end
counts[3] = counts[3] - redis.call('ZCOUNT', EXPIRY, '-inf', ARGV[1])
local soonest = nil
for _, queue in ipairs(redis.call('SMEMBERS', QUEUES)) do
  local first = earliest(queue)
  if first and (soonest == nil or first < soonest) then
    soonest = first
  end
end
counts[5] = soonest and int(soonest) or ''
return counts
