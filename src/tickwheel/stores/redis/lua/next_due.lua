-- next_due.lua: the earliest time a claim of a queue could take something from this shard.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] queue  ARGV[2] now_ms
-- returns: the earlier of the queue's earliest scheduled due time and its earliest lease
--          deadline, in ms, or '' when it has neither here; a lower bound when a slot too big
--          to move in one call may hold the earliest (lib.lua earliest())
-- moves the queue's first slot into its near set when it may hold the earliest
local due = earliest(ARGV[1], ARGV[2])
local deadline = tonumber(redis.call('ZRANGE', lease_key(ARGV[1]), 0, 0, 'WITHSCORES')[2])
if due == nil or (deadline ~= nil and deadline < due) then
  due = deadline
end
return due and int(due) or ''
