-- stats.lua: count the shard's timers per state and queue, and find each queue's earliest
-- scheduled due time.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms
-- returns: {{<code>|<queue>, n, ...}, {queue, earliest due ms, ...}, 1 when every earliest
--          is exact else 0}: done timers past retention are counted until purge.lua (which
--          the store runs first) deletes them; an earliest is a lower bound when a slot too
--          big to move in one call may hold it (call again)
-- counts come from the counts hash. A keyspace written before counts were kept per queue has
-- a bare <code> field per state: the first call recounts the shard's records then, once (it
-- reads every record, in one atomic step, and lists the queues it found in the index of
-- names); finding the earliest moves each queue's first slot into its near set when it may
-- hold it (lib.lua earliest())
local legacy = redis.call('HMGET', COUNTS, SCHEDULED, LEASED, DONE, DEAD, PAUSED)
if legacy[1] or legacy[2] or legacy[3] or legacy[4] or legacy[5] then
  local fresh, seen, cursor = {}, {}, '0'
  repeat
    local reply = redis.call('HSCAN', RECORDS, cursor, 'COUNT', 1000)
    cursor = reply[1]
    local fields = reply[2]
    for i = 1, #fields, 2 do
      if not seen[fields[i]] then
        seen[fields[i]] = true
        local state, queue = string.match(fields[i + 1], '^(%d),%d+,%w+,%w+,%d*,%w+,([^,|]*),')
        if queue == '' then
          queue = DEFAULT_QUEUE
        end
        local name = state .. '|' .. queue
        fresh[name] = (fresh[name] or 0) + 1
      end
    end
  until cursor == '0'
  local flat = redis.call('HGETALL', COUNTS)
  for i = 1, #flat, 2 do
    if string.match(flat[i], '^%d$') or string.match(flat[i], '^%d|') then
      redis.call('HDEL', COUNTS, flat[i])
    end
  end
  redis.call('DEL', QUEUE_NAMES)
  for name, n in pairs(fresh) do
    redis.call('HSET', COUNTS, name, n)
    redis.call('ZADD', QUEUE_NAMES, 0, string.match(name, '^%d|(.*)$'))
  end
end
local counts = {}
local flat = redis.call('HGETALL', COUNTS)
for i = 1, #flat, 2 do
  if string.match(flat[i], '^%d|') then
    counts[#counts + 1] = flat[i]
    counts[#counts + 1] = tonumber(flat[i + 1])
  end
end
local dues, exact = {}, 1
for _, queue in ipairs(redis.call('SMEMBERS', QUEUES)) do
  local first, known = earliest(queue, ARGV[1])
  if not known then
    exact = 0
  end
  if first then
    dues[#dues + 1] = queue
    dues[#dues + 1] = int(first)
  end
end
return { counts, dues, exact }
