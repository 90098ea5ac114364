-- stats.lua: count the shard's timers per state and find its earliest scheduled due time.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms
-- returns: {scheduled, leased, done, dead, earliest due ms or ''}; done timers past retention
--          are not counted
-- counts come from the counts hash, once purge.lua (which the store runs first) has deleted
-- what expired; finding the earliest moves each queue's first slot into its near set when it
-- may hold it (lib.lua earliest())
local counts = redis.call('HMGET', COUNTS, SCHEDULED, LEASED, DONE, DEAD)
for i = 1, 4 do
  counts[i] = tonumber(counts[i]) or 0
end
local soonest = nil
for _, queue in ipairs(redis.call('SMEMBERS', QUEUES)) do
  local first = earliest(queue, ARGV[1])
  if first and (soonest == nil or first < soonest) then
    soonest = first
  end
end
counts[5] = soonest and int(soonest) or ''
return counts
