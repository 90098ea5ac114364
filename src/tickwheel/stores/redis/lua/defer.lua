-- defer.lua: hand a leased timer back unsent, scheduled at a new due time, without spending an
-- attempt: the attempt (the claim count, the lease token) stays and the deferrals rise by one.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] token  ARGV[3] now_ms  ARGV[4] due ms in base 36  ARGV[5] seq
-- ARGV[6] reason  ARGV[7] 1 when this lease's last settle went unanswered (it may have
-- landed), else 0
-- returns: 1 when deferred, or with ARGV[7] 1 when scheduled already at that due time with
--          that token (the earlier call landed: the deferrals are not raised twice); 0 when
--          the token no longer holds the lease (nothing changed)
local id = ARGV[1]
local r = settle(id, ARGV[2])
if r == nil then
  local raw = ARGV[7] == '1' and redis.call('HGET', RECORDS, id)
  local attempt, due = string.match(raw or '', '^0,(%d+),(%w+),')
  return attempt == ARGV[2] and due == ARGV[4] and 1 or 0
end
unhold(r)
r.state, r.updated, r.due, r.seq = SCHEDULED, ARGV[3], ARGV[4], ARGV[5]
r.deferrals = int((tonumber(r.deferrals) or 0) + 1)
if tonumber(r.attempt) - tonumber(r.deferrals) <= 0 then
  r.first = '' -- no attempt made yet: the run of attempts has not begun
end
set_error(r, ARGV[6])
save(id, r)
enqueue(id, r, ARGV[3])
count(LEASED, r.queue, -1)
count(SCHEDULED, r.queue, 1)
finish()
return 1
