-- stats.lua: count the shard's timers per state and find its earliest scheduled due time.
-- KEYS[1..8] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms
-- returns: {scheduled, leased, done, dead, earliest due ms or ''}; done past retention not counted
-- read-only; visits one bucket per queue that has scheduled timers here
local counts = {}
for i, state in ipairs({ SCHEDULED, LEASED, DONE, DEAD }) do
  counts[i] = redis.call('ZCARD', STATE_SET[state])
end
counts[3] = counts[3] - redis.call('ZCOUNT', EXPIRY, '-inf', ARGV[1])
local earliest = nil
for _, queue in ipairs(redis.call('SMEMBERS', QUEUES)) do
  local minute = redis.call('ZRANGE', index_key(queue), 0, 0)[1]
  if minute then
    local first = redis.call('ZRANGE', bucket_key(queue, minute), 0, 0, 'WITHSCORES')[2]
    if first and (earliest == nil or tonumber(first) < tonumber(earliest)) then
      earliest = first
    end
  end
end
counts[5] = earliest or ''
return counts
