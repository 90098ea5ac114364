-- add_one.lua: add.lua's common case, one timer whose id no record holds, in the least Lua.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] id  ARGV[3] its new record (add.lua's format)
-- returns: 0 when stored; nil when a record holds the id (nothing changed: the caller sends
--          the timer to add.lua, which knows what to do then)
-- One HSETNX, two reads to decide whether to publish to the waiters, one SADD, one write
-- into the near set or a slot (and its index when the slot is new), one ZADD of the queue's
-- head, one HINCRBY (and a ZADD of its name for its first timer here). It places
-- the timer as lib.lua places timers, written out here with lib.lua's constants and no lib
-- function: Redis runs a script's whole text each call, and each function a script takes
-- from lib.lua costs it a closure a call (a third of a lone add's Redis time). The tests'
-- layout check holds both ways to one layout; keep them alike.
local now, id, raw = ARGV[1], ARGV[2], ARGV[3]
local due, seq, queue = string.match(raw, '^0,0,(%w+),%w+,%d*,(%w+),([^,|]*),')
if due == nil then
  error('tickwheel: add_one.lua needs a new scheduled record, got ' .. string.sub(raw, 1, 60))
end
if queue == '' then
  queue = DEFAULT_QUEUE
end
if redis.call('HSETNX', RECORDS, id, raw) == 0 then
  return false
end
local prefix = TAG .. ':q:' .. queue .. ':' -- the queue's keys start so
local d, n = tonumber(due, 36), tonumber(now)
-- the waiters of the queue hear of a timer that may now come first in it here
local near = first_near(queue)
local first = first_number(prefix .. 'i1')
if (near == nil or d < near) and (first == nil or d < first + MINUTE_SLOT) then
  redis.call('PUBLISH', WAKE, queue)
end
redis.call('SADD', QUEUES, queue)
redis.call('ZADD', TAG .. ':h', 'LT', string.format('%d', d), queue) -- its head (lib.lua)
-- the near set when due before the end of the current minute, else its day slot if that day
-- starts over MINUTE_RANGE from now, else its minute slot
if d < n - n % MINUTE_SLOT + MINUTE_SLOT then
  redis.call('ZADD', prefix .. 'n', string.format('%d', d), DUE_LENGTH[#due] .. due .. seq .. id)
else
  local level, width = 1, MINUTE_SLOT
  if d - d % DAY_SLOT > n + MINUTE_RANGE then
    level, width = 2, DAY_SLOT
  end
  local start = string.format('%d', d - d % width)
  if redis.call('RPUSH', prefix .. level .. ':' .. start, id) == 1 then
    redis.call('ZADD', prefix .. 'i' .. level, start, start)
  end
end
-- <state>|<queue>, and the queue's name in the shard's index with its first field (lib.lua)
if redis.call('HINCRBY', COUNTS, SCHEDULED .. '|' .. queue, 1) == 1 then
  redis.call('ZADD', TAG .. ':qn', 0, queue)
end
return 0
