-- peek.lua: show, changing nothing, the expired leases and the first timers a claim would take.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)  KEYS[7] the queue's bucket index
-- ARGV[1] queue  ARGV[2] horizon_ms  ARGV[3] limit  ARGV[4] now_ms  ARGV[5] lease limit
-- returns: { {lease member1, deadline1, ...} at most ARGV[5], in (deadline, lease seq) order,
--            {member1, due1, member2, due2, ...} at most ARGV[3], in (due, seq) order }
--          members are <seq><id>
-- read-only; visits at most limit + 1 buckets (the index holds only non-empty ones)
local queue, horizon, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local expired = redis.call('ZRANGEBYSCORE', LEASES, '-inf', ARGV[4], 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[5]))
local due, found, offset = {}, 0, 0
while found < limit do
  local lows = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', horizon, 'LIMIT', offset, 16)
  if #lows == 0 then
    break
  end
  offset = offset + #lows
  for _, low in ipairs(lows) do
    local timers = redis.call('ZRANGEBYSCORE', bucket_key(queue, low), '-inf', horizon,
      'WITHSCORES', 'LIMIT', 0, limit - found)
    for _, value in ipairs(timers) do
      due[#due + 1] = value
    end
    found = found + #timers / 2
    if found >= limit then
      break
    end
  end
end
return { expired, due }
