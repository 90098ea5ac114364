-- queue_page.lua: the shard's part of a page of the queue table: its first queues named after
-- a cursor, or the counts of named queues.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] the last name of the previous page, '' for the first   ARGV[2] how many at most
-- ARGV[3] now_ms   ARGV[4..] queues to count (none: list names)
-- returns: {payload, 1 when every earliest is exact else 0, 1 when the shard's counts are not
--          kept per queue yet (then nothing else: stats.lua recounts them first)}; the
--          payload is {queue, ...} when listing names, else {queue, n scheduled, n leased,
--          n done, n dead, n paused, earliest due ms or '', ...} for each named queue that has
--          timers here
-- The names come from the shard's index of its queues (<tag>:qn, score 0, kept by finish());
-- a shard written before the index existed gets it built from its counts hash by the first
-- call, once (<tag>:qnv marks it built). Done timers past retention are counted until
-- purge.lua (which the store runs first) deletes them; an earliest is a lower bound when a
-- slot too big to move in one call may hold it (call again), as in stats.lua.
local legacy = redis.call('HMGET', COUNTS, SCHEDULED, LEASED, DONE, DEAD, PAUSED)
if legacy[1] or legacy[2] or legacy[3] or legacy[4] or legacy[5] then
  return { {}, 1, 1 }
end
if redis.call('EXISTS', TAG .. ':qnv') == 0 then
  redis.call('DEL', QUEUE_NAMES)
  local fields, names = redis.call('HKEYS', COUNTS), {}
  for i = 1, #fields do
    local queue = string.match(fields[i], '^%d|(.*)$')
    if queue and not names[queue] then
      names[queue] = true
      redis.call('ZADD', QUEUE_NAMES, 0, queue)
    end
  end
  redis.call('SET', TAG .. ':qnv', '1')
end
if #ARGV == 3 then
  local from = ARGV[1] == '' and '-' or '(' .. ARGV[1]
  local names = redis.call('ZRANGEBYLEX', QUEUE_NAMES, from, '+', 'LIMIT', 0, tonumber(ARGV[2]))
  return { names, 1, 0 }
end
local rows, exact = {}, 1
for i = 4, #ARGV do
  local queue = ARGV[i]
  if redis.call('ZSCORE', QUEUE_NAMES, queue) then
    local counts = redis.call(
      'HMGET',
      COUNTS,
      SCHEDULED .. '|' .. queue,
      LEASED .. '|' .. queue,
      DONE .. '|' .. queue,
      DEAD .. '|' .. queue,
      PAUSED .. '|' .. queue
    )
    rows[#rows + 1] = queue
    for n = 1, 5 do
      rows[#rows + 1] = counts[n] or '0'
    end
    local first, known = nil, true
    if redis.call('SISMEMBER', QUEUES, queue) == 1 then
      first, known = earliest(queue, ARGV[3])
    end
    if not known then
      exact = 0
    end
    rows[#rows + 1] = first and int(first) or ''
  end
end
return { rows, exact, 0 }
