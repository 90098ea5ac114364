-- schedule_step.lua: apply planned schedule steps, each only if what it was planned from is
-- unchanged (compare and set): the schedule's value, its pending occurrence's state, the lease.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)  KEYS[7] schedules  KEYS[8] schedule ids
-- ARGV[1] now_ms  ARGV[2] the steps, each a line of space-separated fields (any may be empty)
--   "<schedule id> <cancel> <cancel state> <leased> <token> <drop> <n1> <n2> <n3>\n"
--   then <expect> (n1 bytes), <value> (n2 bytes), <occurrence> (n3 bytes):
--   expect: the schedule's value as read ('' when there was none); value: its new value (''
--   deletes it); cancel: an occurrence to cancel if it is scheduled, whose state code as read
--   is <cancel state> ('' absent; '*' when it does not matter); occurrence: a new one as
--   "<id>\n<record>\n" (add.lua's format); leased, token: an occurrence whose lease the step
--   needs held; drop '1' deletes it (it does not fire)
-- returns: per step 1 when applied, 0 when the lease is no longer held, -1 when the schedule
--          or its pending occurrence changed since they were read (0 and -1 change nothing)
-- bounded by the number of steps, which the store caps per call; publishes a wake (lib.lua)
-- naming the queues whose earliest due time here a new occurrence may bring forward
local now = ARGV[1]
-- one argument for all the steps: the client encodes one string instead of nine per step
local text, at = ARGV[2], 1
local p = placer(now, 2, true)
local results = {}
while at <= #text do
  local id, pending, pending_state, leased, token, drop, n1, n2, n3, rest = string.match(text,
    '^([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) (%d+) (%d+) (%d+)\n()', at)
  local value_at = rest + tonumber(n1)
  local occurrence_at = value_at + tonumber(n2)
  at = occurrence_at + tonumber(n3)
  local expect = string.sub(text, rest, value_at - 1)
  local value = string.sub(text, value_at, occurrence_at - 1)
  local occurrence = string.sub(text, occurrence_at, at - 1)
  local held = nil
  local status = 1
  if leased ~= '' then
    -- the header says whether the lease holds; the record is parsed only to drop it
    held = redis.call('HGET', RECORDS, leased)
    if not held or string.match(held, '^1,(%d+),') ~= token then
      held = nil
      status = 0
    end
  end
  if status == 1 and (redis.call('HGET', SCHEDULES, id) or '') ~= expect then
    status = -1
  end
  local old = nil
  if status == 1 and pending ~= '' then
    old = load(pending)
    if old ~= nil and expired(old, now) then
      old = nil
    end
    if pending_state ~= '*' and (old and old.state or '') ~= pending_state then
      status = -1
    end
  end
  if status == 1 then
    if value == '' then
      redis.call('HDEL', SCHEDULES, id)
      redis.call('ZREM', SCHEDULE_IDS, id)
    else
      redis.call('HSET', SCHEDULES, id, value)
      if expect == '' then
        redis.call('ZADD', SCHEDULE_IDS, 0, id)
      end
    end
    local cancelled = nil
    if old ~= nil and old.state == SCHEDULED then
      -- occurrences placed by earlier steps go in first, so none is cancelled half-placed
      flush(p)
      p = placer(now, 2, true)
      forget(pending, old)
      cancelled = old.attempt
    end
    if occurrence ~= '' then
      local id_end = string.find(occurrence, '\n', 1, true)
      local new_id = string.sub(occurrence, 1, id_end - 1)
      occur(new_id, string.sub(occurrence, id_end + 1, -2), p, new_id == pending and cancelled)
    end
    if held ~= nil and drop == '1' then
      forget(leased, parse(held))
    end
  end
  results[#results + 1] = status
end
flush(p)
finish()
return results
