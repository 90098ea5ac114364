-- pause.lua: take a scheduled timer out of its queue, keeping its record (attempt, error,
-- first claim time, due time): no claim takes it until resume.lua.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] now_ms
-- returns: 1 when paused, 0 when no scheduled timer has that id (nothing changed)
-- a day slot's entry goes stale, as after a cancel (cascade() drops it: the record is not
-- scheduled, or is due at another time, or was placed again by resume.lua)
local id = ARGV[1]
local r = load(id)
if r == nil or r.state ~= SCHEDULED then
  return 0
end
dequeue(id, r)
r.state, r.updated = PAUSED, ARGV[2]
save(id, r)
count(SCHEDULED, r.queue, -1)
count(PAUSED, r.queue, 1)
finish()
return 1
