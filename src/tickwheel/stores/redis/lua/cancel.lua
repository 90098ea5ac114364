-- cancel.lua: delete a scheduled or paused timer: its record and its entry in the near set or
-- a slot.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id
-- returns: 1 when a timer was deleted, 0 when there was none (or it is leased or finished)
local id = ARGV[1]
local r = load(id)
if r == nil or (r.state ~= SCHEDULED and r.state ~= PAUSED) then
  return 0
end
forget(id, r)
finish()
return 1
