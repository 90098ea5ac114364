-- resume.lua: schedule a paused timer again at its own due time (the near set at once when
-- that has passed), behind the timers of its queue due at the same time.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] now_ms  ARGV[3] seq (9 base-62 digits, record.py)
-- returns: 1 when resumed, 0 when no paused timer has that id (nothing changed)
local id = ARGV[1]
local r = load(id)
if r == nil or r.state ~= PAUSED then
  return 0
end
r.state, r.updated, r.seq = SCHEDULED, ARGV[2], ARGV[3]
save(id, r)
enqueue(id, r, ARGV[2])
count(PAUSED, r.queue, -1)
count(SCHEDULED, r.queue, 1)
finish()
return 1
