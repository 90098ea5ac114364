-- defer.lua: hand leased timers back unsent, each scheduled at a new due time, without
-- spending an attempt: the attempt (the claim count, the lease token) stays and the
-- deferrals rise by one.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms, then per lease six: id, token, due ms in base 36, seq, reason, and 1 when
-- this lease's last settle went unanswered (it may have landed), else 0
-- returns: one entry per lease: 1 when deferred, or with its sixth 1 when scheduled already at
--          that due time with that token (the earlier call landed: the deferrals are not
--          raised twice); 0 when the token no longer holds the lease (nothing changed; an id
--          repeated in the call is deferred once)
-- bounded by the number of leases, which the store caps per call; the timers are placed
-- and their queues' counts written once for the call
local now = ARGV[1]
local p = placer(now, 2, true)
local results = {}
for i = 2, #ARGV, 6 do
  local id, token, due = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local r = settle(id, token)
  if r == nil then
    local raw = ARGV[i + 5] == '1' and redis.call('HGET', RECORDS, id)
    local attempt, stored_due = string.match(raw or '', '^0,(%d+),(%w+),')
    results[#results + 1] = attempt == token and stored_due == due and 1 or 0
  else
    unhold(r)
    r.state, r.updated, r.due, r.seq = SCHEDULED, now, due, ARGV[i + 3]
    r.deferrals = int((tonumber(r.deferrals) or 0) + 1)
    if tonumber(r.attempt) - tonumber(r.deferrals) <= 0 then
      r.first = '' -- no attempt made yet: the run of attempts has not begun
    end
    set_error(r, ARGV[i + 4])
    save(id, r)
    put(p, r.queue, id, r.due, r.seq)
    count(LEASED, r.queue, -1)
    count(SCHEDULED, r.queue, 1)
    results[#results + 1] = 1
  end
end
flush(p)
finish()
return results
