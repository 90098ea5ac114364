-- retry.lua: return a leased timer to scheduled at a new due time, recording the error.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] token  ARGV[3] now_ms  ARGV[4] due ms in base 36  ARGV[5] seq
-- ARGV[6] error  ARGV[7] 1 when this lease's last settle went unanswered (it may have
-- landed), else 0
-- ARGV[8] the attempt to record (JSON) or ''  ARGV[9] attempts kept per timer
-- ARGV[10] attempt retention ms
-- returns: 1 when rescheduled, or with ARGV[7] 1 when scheduled already at that due time with
--          that token; 0 when the token no longer holds the lease (nothing changed)
local id = ARGV[1]
local r = settle(id, ARGV[2])
if r == nil then
  local raw = ARGV[7] == '1' and redis.call('HGET', RECORDS, id)
  local attempt, due = string.match(raw or '', '^0,(%d+),(%w+),')
  return attempt == ARGV[2] and due == ARGV[4] and 1 or 0
end
unhold(r)
r.state, r.updated, r.due, r.seq = SCHEDULED, ARGV[3], ARGV[4], ARGV[5]
set_error(r, ARGV[6])
save(id, r)
record_attempt(id, ARGV[8], ARGV[9], ARGV[10])
enqueue(id, r, ARGV[3])
count(LEASED, r.queue, -1)
count(SCHEDULED, r.queue, 1)
finish()
return 1
