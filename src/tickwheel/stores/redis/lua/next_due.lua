-- next_due.lua: the earliest time a claim of a queue could take something from this shard.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)  KEYS[7] the queue's bucket index
-- KEYS[8] the queue's lease zset
-- ARGV[1] queue
-- returns: the earlier of the queue's earliest scheduled due time and its earliest lease
--          deadline, in ms, or '' when it has neither here
-- read-only; two index probes and one bucket probe
local due = earliest(ARGV[1])
local deadline = tonumber(redis.call('ZRANGE', KEYS[8], 0, 0, 'WITHSCORES')[2])
if due == nil or (deadline ~= nil and deadline < due) then
  due = deadline
end
return due and int(due) or ''
