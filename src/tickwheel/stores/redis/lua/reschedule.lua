-- reschedule.lua: move a scheduled timer to another due time (and to the back of its ties);
-- its first claim time is cleared. A paused timer gets the new due time and stays paused, out
-- of its queue's wheel (resume.lua places it).
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] due ms in base 36  ARGV[3] now_ms  ARGV[4] seq (9 base-62 digits,
-- record.py)
-- returns: 1 when moved, 0 when no scheduled or paused timer has that id
local id = ARGV[1]
local r = load(id)
if r == nil or (r.state ~= SCHEDULED and r.state ~= PAUSED) then
  return 0
end
if r.state == PAUSED then
  r.due, r.updated, r.first = ARGV[2], ARGV[3], ''
  save(id, r)
  return 1
end
dequeue(id, r)
r.due, r.updated, r.seq, r.first = ARGV[2], ARGV[3], ARGV[4], ''
save(id, r)
enqueue(id, r, ARGV[3])
return 1
