-- stats.lua: count the shard's timers per state and find its earliest scheduled due time.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms
-- returns: {scheduled, leased, done, dead, earliest due ms or '', 1 when that is exact else 0}:
--          done timers past retention are not counted; the earliest is a lower bound when a
--          slot too big to move in one call may hold it (call again)
-- counts come from the counts hash, once purge.lua (which the store runs first) has deleted
-- what expired; finding the earliest moves each queue's first slot into its near set when it
-- may hold it (lib.lua earliest())
local counts = redis.call('HMGET', COUNTS, SCHEDULED, LEASED, DONE, DEAD)
for i = 1, 4 do
  counts[i] = tonumber(counts[i]) or 0
end
local soonest, exact = nil, 1
for _, queue in ipairs(redis.call('SMEMBERS', QUEUES)) do
  local first, known = earliest(queue, ARGV[1])
  if not known then
    exact = 0
  end
  if first and (soonest == nil or first < soonest) then
    soonest = first
  end
end
counts[5] = soonest and int(soonest) or ''
counts[6] = exact
return counts
