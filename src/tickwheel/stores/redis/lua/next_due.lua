-- next_due.lua: for each of some queues, the earliest time a claim of it could take something
-- from this shard.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms, then the queues
-- returns: per queue the earlier of its earliest scheduled due time and its earliest lease
--          deadline, in ms, or '' when it has neither here; a lower bound when a slot too
--          big to move in one call may hold the earliest (lib.lua earliest())
-- moves each queue's first slot into its near set when it may hold the earliest
local dues = {}
for i = 2, #ARGV do
  local due = earliest(ARGV[i], ARGV[1])
  local deadline = first_number(lease_key(ARGV[i]))
  if due == nil or (deadline ~= nil and deadline < due) then
    due = deadline
  end
  dues[i - 1] = due and int(due) or ''
end
return dues
