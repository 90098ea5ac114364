-- replay.lua: schedule a dead timer again, due now (attempt and last error kept, first claim
-- time cleared: a new run of attempts begins).
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] now_ms  ARGV[3] seq  ARGV[4] now_ms in base 36 (the new due time)
-- returns: 1 when replayed, 0 when no dead timer has that id
local id = ARGV[1]
local r = load(id)
if r == nil or r.state ~= DEAD then
  return 0
end
redis.call('ZREM', DEAD_SET, id)
r.state, r.due, r.updated, r.seq, r.first = SCHEDULED, ARGV[4], ARGV[2], ARGV[3], ''
save(id, r)
enqueue(id, r, ARGV[2])
count(DEAD, r.queue, -1)
count(SCHEDULED, r.queue, 1)
finish()
return 1
