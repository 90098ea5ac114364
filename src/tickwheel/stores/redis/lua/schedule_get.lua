-- schedule_get.lua: read schedules, each with one timer of its shard (an occurrence of it).
-- KEYS[1..6] the shard's fixed keys (see lib.lua)  KEYS[7] schedules  KEYS[8] schedule ids
-- ARGV[1] now_ms  ARGV[2] "<schedule id> <timer id>\n" per read (no timer: an empty id)
-- returns: per read, flat: the schedule's encoded value or nil, the timer's record or nil (a
--          done timer past its retention reads as absent)
-- read-only; bounded by the number of reads, which the store caps per call
local now = ARGV[1]
local out = {}
for id, timer_id in string.gmatch(ARGV[2], '([^ ]+) ([^\n]*)\n') do
  out[#out + 1] = redis.call('HGET', SCHEDULES, id)
  local raw = timer_id ~= '' and redis.call('HGET', RECORDS, timer_id)
  if raw and string.sub(raw, 1, 1) == DONE and expired(parse(raw), now) then
    raw = false
  end
  out[#out + 1] = raw
end
return out
