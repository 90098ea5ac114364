-- add.lua: store new scheduled timers; where a live timer holds the id, report it instead.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] replace: '1' overwrites a live timer, '0' leaves it untouched
-- ARGV[3] "<id>\n<record>\n" per timer (record.py: scheduled, attempt 0, created now; a new
--         record holds no newline, JSON escapes them); the ids of one call are distinct
-- returns: one entry per timer: when stored, its attempt (0, or the replaced timer's: a lease
--          on the replaced timer must never match a claim of the new one); else the live
--          record under that id (unchanged)
-- bounded by the number of timers, which the store caps per call; new timers are written with
-- one variadic command per key, so a batch costs a few calls, not a few per timer; publishes a
-- wake (lib.lua) per queue whose earliest due time here the batch brings forward
local now, replace = ARGV[1], ARGV[2] == '1'
local ids, records = {}, {}
for id, raw in string.gmatch(ARGV[3], '([^\n]+)\n([^\n]+)\n') do
  ids[#ids + 1] = id
  records[#records + 1] = raw
end
local existing = redis.call('HMGET', RECORDS, unpack(ids))
local results = {}
local fields, stored, inserts, queues = {}, {}, {}, {}
local soonest = {} -- queue → earliest due among the timers stored
for n, id in ipairs(ids) do
  local raw = records[n]
  -- only what the bucket needs: due, seq and queue (parse() takes twice as long)
  local due, seq, queue = string.match(raw, '^0,0,(%-?%d+),%-?%w+,,(%w+),([^,|]*),')
  if due == nil then
    error('tickwheel: add.lua needs new scheduled records, got ' .. string.sub(raw, 1, 60))
  end
  if queue == '' then
    queue = DEFAULT_QUEUE
  end
  local old = existing[n] and parse(existing[n])
  if old and expired(id, old, now) then
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
      raw = '0,' .. attempt .. string.sub(raw, 4) -- a new record starts '0,0,'
    end
    fields[#fields + 1] = id
    fields[#fields + 1] = raw
    stored[#stored + 1] = id
    inserts[#inserts + 1] = { queue, due, seq .. id }
    queues[queue] = true
    if soonest[queue] == nil or tonumber(due) < tonumber(soonest[queue]) then
      soonest[queue] = due
    end
    results[n] = tonumber(attempt)
  end
end
for queue, due in pairs(soonest) do
  wake(queue, due)
end
if #fields > 0 then
  redis.call('HSET', RECORDS, unpack(fields))
  local sizes = {}
  for _, id in ipairs(stored) do
    index_id(id, sizes)
  end
  local pages = {}
  for _, entry in ipairs(inserts) do
    insert(entry[1], entry[2], entry[3], pages)
  end
  for queue in pairs(queues) do
    redis.call('SADD', QUEUES, queue)
  end
end
return results
