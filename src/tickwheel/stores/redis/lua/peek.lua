-- peek.lua: show the expired leases and the first timers a claim would take.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] queue  ARGV[2] horizon_ms  ARGV[3] limit  ARGV[4] now_ms  ARGV[5] lease limit
-- returns: { {batch1, deadline1, {member, ...}, batch2, ...}: the expired lease batches,
--            whole, until they list ARGV[5] or more leases in all, each with <lease seq><id>
--            of the timers that still hold its lease,
--            {member1, member2, ...} of the near set (they begin with the due time), at most
--            ARGV[3], in (due, seq) order,
--            1 when slots the horizon reaches are only partly moved (call again), else 0 }
-- moves the slots the horizon reaches into the near set, as claim.lua does, at most
-- CASCADE_BUDGET entries a call; sets the queue's head here (lib.lua set_head())
local queue, horizon, limit, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local expired, held = {}, 0
local names = redis.call('ZRANGEBYSCORE', LEASES, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 64)
for i = 1, #names, 2 do
  local deadline, q = string.match(names[i], '^([^|]*)|(.*)$')
  local ids = redis.call('LRANGE', batch_key(q, deadline), 0, -1)
  local live, seen = {}, {}
  if #ids > 0 then
    local raws = records_of(ids)
    for n, id in ipairs(ids) do
      local raw = raws[n]
      if raw and string.sub(raw, 1, 1) == LEASED and not seen[id] then
        local r = parse(raw)
        if r.queue == q and string.sub(r.seq, SEQ_DIGITS + 1) == deadline then
          seen[id] = true
          live[#live + 1] = string.sub(r.seq, 1, SEQ_DIGITS) .. id
        end
      end
    end
  end
  expired[#expired + 1] = names[i]
  expired[#expired + 1] = names[i + 1]
  expired[#expired + 1] = live
  held = held + #live
  if held >= tonumber(ARGV[5]) then
    break
  end
end
local by = ready(queue, horizon, now)
local due = redis.call('ZRANGEBYSCORE', near_key(queue), '-inf', by, 'LIMIT', 0, limit)
set_head(queue) -- a shard the claim passes over holds its head right too
return { expired, due, by == horizon and 0 or 1 }
