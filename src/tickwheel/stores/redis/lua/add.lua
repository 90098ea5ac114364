-- add.lua: store new scheduled timers; where a live timer holds the id, report it instead.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] replace: '1' overwrites a live timer, '0' leaves it untouched
-- ARGV[3] "<id>\n<record>\n" per timer (record.py: scheduled, attempt 0, created now; a new
--         record holds no newline, JSON escapes them); the ids of one call are distinct
-- returns: one entry per timer: when stored, its attempt (0, or the replaced timer's: a lease
--          on the replaced timer must never match a claim of the new one), or {attempt,
--          deferrals} when the replaced timer had deferrals; else the live record under that
--          id (unchanged)
-- bounded by the number of timers, which the store caps per call; one HMGET, one HSET and one
-- variadic write per slot; one PUBLISH (lib.lua) names the queues whose earliest due time
-- here the batch may bring forward
local now, replace = ARGV[1], ARGV[2] == '1'
local ids, records = {}, {}
local text, at = ARGV[3], 1
while at < #text do -- a plain find, not a pattern: classes cost per character
  local id_end = string.find(text, '\n', at, true)
  local raw_end = string.find(text, '\n', id_end + 1, true)
  ids[#ids + 1] = string.sub(text, at, id_end - 1)
  records[#records + 1] = string.sub(text, id_end + 1, raw_end - 1)
  at = raw_end + 1
end
local existing = records_of(ids)
local results, fields = {}, {}
local p = placer(now, 2, true)
for n, id in ipairs(ids) do
  local raw = records[n]
  local due, seq, queue = scheduled_fields(raw)
  if due == nil or string.sub(raw, 1, 4) ~= '0,0,' then
    error('tickwheel: add.lua needs new scheduled records, got ' .. string.sub(raw, 1, 60))
  end
  local old = existing[n] and parse(existing[n])
  if old and expired(old, now) then
    forget(id, old)
    old = nil
  end
  if old and not replace then
    results[n] = existing[n]
  else
    local attempt = '0'
    if old then
      forget(id, old)
      attempt = old.attempt
      raw = '0,' .. attempt .. string.sub(with_deferrals(raw, old.deferrals), 4) -- '0,0,...'
    end
    fields[#fields + 1] = id
    fields[#fields + 1] = raw
    put(p, queue, id, due, seq)
    count(SCHEDULED, queue, 1)
    results[n] = tonumber(attempt)
    if old and old.deferrals ~= '' then
      results[n] = { results[n], tonumber(old.deferrals) } -- the deferrals carry over too
    end
  end
end
if #fields > 0 then
  redis.call('HSET', RECORDS, unpack(fields))
  flush(p)
  finish()
end
return results
