-- limit.lua: give back finished callbacks' concurrency, then grant a batch of callbacks what
-- the token buckets and concurrency counts of their targets allow now, by the server's clock.
-- KEYS[2t-1] target t's bucket hash (v: tokens, t: ms they were counted at)
-- KEYS[2t]   target t's concurrency zset (member -> ms its grant lapses)
-- ARGV[1] T, then T x (rate a second or 0, bucket size, concurrency or 0)
--   then R, then R x (target index, member) to give back
--   then to the end, one ask after another: want, hold_ms, k, m, spare, k x target index,
--   m x member (members name concurrency grants: an ask with a concurrency bound gets at most
--   m; spare: grants more wanted for callbacks soon, given only to an ask granted in full,
--   with no concurrency bound, from buckets left over half full)
-- returns: {granted, wait_ms, spare granted, ...} per ask: the first `granted` may go; wait_ms
-- is 0 when all were granted, the ms until the next token, or -1 while a concurrency count is
-- full
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local T = tonumber(ARGV[1])
local rate, size, conc, tokens, room = {}, {}, {}, {}, {}
local i = 2
for t = 1, T do
  rate[t], size[t], conc[t] = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  i = i + 3
end
local R = tonumber(ARGV[i])
i = i + 1
for _ = 1, R do
  redis.call('ZREM', KEYS[2 * tonumber(ARGV[i])], ARGV[i + 1])
  i = i + 2
end
for t = 1, T do
  if rate[t] > 0 then
    local state = redis.call('HMGET', KEYS[2 * t - 1], 'v', 't')
    local v, at = tonumber(state[1]), tonumber(state[2])
    if v == nil or at == nil then
      tokens[t] = size[t]
    else
      tokens[t] = math.min(size[t], v + math.max(0, now - at) * rate[t] / 1000)
    end
  end
  if conc[t] > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[2 * t], '-inf', now)
    room[t] = conc[t] - redis.call('ZCARD', KEYS[2 * t])
  end
end
local out = {}
while i <= #ARGV do
  local want, hold = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  local k, m, spare = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  i = i + 5
  local targets = {}
  local n = want
  for j = 1, k do
    local t = tonumber(ARGV[i + j - 1])
    targets[j] = t
    if rate[t] > 0 then n = math.min(n, math.floor(tokens[t])) end
    if conc[t] > 0 then n = math.min(n, room[t], m) end
  end
  i = i + k
  n = math.max(n, 0)
  local extra = 0
  if n == want and spare > 0 then
    extra = spare
    for _, t in ipairs(targets) do
      if conc[t] > 0 then
        extra = 0
      elseif rate[t] > 0 then
        extra = math.min(extra, math.floor(tokens[t] - n - size[t] / 2))
      end
    end
    extra = math.max(extra, 0)
  end
  local wait = 0
  for _, t in ipairs(targets) do
    if rate[t] > 0 then tokens[t] = tokens[t] - n - extra end
    if conc[t] > 0 and n > 0 then
      room[t] = room[t] - n
      local args = {}
      for m = 0, n - 1 do
        args[2 * m + 1] = now + hold
        args[2 * m + 2] = ARGV[i + m]
      end
      redis.call('ZADD', KEYS[2 * t], unpack(args))
      redis.call('PEXPIRE', KEYS[2 * t], hold)
    end
  end
  if n < want then
    for _, t in ipairs(targets) do
      if conc[t] > 0 and room[t] <= 0 then
        wait = -1
      elseif wait >= 0 and rate[t] > 0 and tokens[t] < 1 then
        wait = math.max(wait, math.ceil((1 - tokens[t]) * 1000 / rate[t]))
      end
    end
  end
  i = i + m
  out[#out + 1] = n
  out[#out + 1] = wait
  out[#out + 1] = extra
end
for t = 1, T do
  if rate[t] > 0 then
    redis.call('HSET', KEYS[2 * t - 1], 'v', tostring(tokens[t]), 't', tostring(now))
    redis.call('PEXPIRE', KEYS[2 * t - 1], math.ceil(size[t] * 1000 / rate[t]) + 1000)
  end
end
return out
