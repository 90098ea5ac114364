-- add_one.lua: add.lua's common case, one timer whose id no record holds: no batch to read.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] id  ARGV[3] its new record (add.lua's format)
-- returns: 0 when stored; nil when a record holds the id (nothing changed: the caller sends
--          the timer to add.lua, which knows what to do then)
local now, id, raw = ARGV[1], ARGV[2], ARGV[3]
local due, seq, queue = scheduled_fields(raw)
if due == nil or string.sub(raw, 1, 4) ~= '0,0,' then
  error('tickwheel: add_one.lua needs a new scheduled record, got ' .. string.sub(raw, 1, 60))
end
if redis.call('HSETNX', RECORDS, id, raw) == 0 then
  return false
end
local p = placer(now, 2, true)
put(p, queue, id, due, seq)
flush(p)
count(SCHEDULED, queue, 1)
finish()
return 0
