-- kill.lua: move a leased timer to the dead letters, recording the error.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] token  ARGV[3] now_ms  ARGV[4] error
-- ARGV[5] 1 when this lease's last settle went unanswered (it may have landed), else 0
-- ARGV[6] the attempt to record (JSON) or ''  ARGV[7] attempts kept per timer
-- ARGV[8] attempt retention ms
-- returns: 1 when killed, or with ARGV[5] 1 when dead already with that token; 0 when the
--          token no longer holds the lease (nothing changed)
local id = ARGV[1]
local r = settle(id, ARGV[2])
if r == nil then
  local raw = ARGV[5] == '1' and redis.call('HGET', RECORDS, id)
  return raw and string.match(raw, '^3,(%d+),') == ARGV[2] and 1 or 0
end
unhold(r)
r.state, r.updated = DEAD, ARGV[3]
set_error(r, ARGV[4])
save(id, r)
record_attempt(id, ARGV[6], ARGV[7], ARGV[8])
redis.call('ZADD', DEAD_SET, 0, id)
count(LEASED, r.queue, -1)
count(DEAD, r.queue, 1)
finish()
return 1
