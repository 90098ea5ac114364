-- queues.lua: the queues that hold scheduled or leased timers in this shard (read only).
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV none
-- returns: {queue1, queue2, ...}, each once, unordered: the queues set, then the queues of
--          the lease batches (members <deadline>|<queue>); the work is bounded by the
--          shard's queues and lease batches (a batch per queue and deadline still held)
local found, seen = {}, {}
for _, queue in ipairs(redis.call('SMEMBERS', QUEUES)) do
  seen[queue] = true
  found[#found + 1] = queue
end
for _, name in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do
  local queue = string.match(name, '^%d+|(.*)$')
  if queue and not seen[queue] then
    seen[queue] = true
    found[#found + 1] = queue
  end
end
return found
