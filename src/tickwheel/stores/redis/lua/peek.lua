-- peek.lua: show the expired leases and, for each of some queues, the first timers a claim of
-- it would take.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] lease limit, then per queue three: queue, horizon_ms, limit
-- returns: { {batch1, deadline1, {member, ...}, batch2, ...}: the expired lease batches,
--            whole, until they list ARGV[2] or more leases in all, each with <lease seq><id>
--            of the timers that still hold its lease,
--            then per queue two: {member1, member2, ...} of its near set (they begin with the
--            due time), at most its limit, in (due, seq) order, and 1 when slots its horizon
--            reaches are only partly moved (call again), else 0 }
-- moves the slots each horizon reaches into the near set, as claim.lua does, at most
-- CASCADE_BUDGET entries per queue; sets the head here (lib.lua set_head()) of each queue it
-- shows nothing of (a head needs no setting while it is due: the claim sets it); a queue
-- with no head here (nothing scheduled or leased here) is passed over without a look at its
-- keys
local now = ARGV[1]
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
  if held >= tonumber(ARGV[2]) then
    break
  end
end
local out = { expired }
-- once the heads are kept (heads.lua), a queue with no head here holds nothing here
local kept = redis.call('EXISTS', TAG .. ':hv') == 1
for i = 3, #ARGV, 3 do
  local queue, horizon = ARGV[i], ARGV[i + 1]
  if kept and not redis.call('ZSCORE', HEADS, queue) then
    out[#out + 1] = {}
    out[#out + 1] = 0
  else
    local by = ready(queue, horizon, now)
    local shown = redis.call('ZRANGEBYSCORE', near_key(queue), '-inf', by, 'LIMIT', 0,
      tonumber(ARGV[i + 2]))
    out[#out + 1] = shown
    out[#out + 1] = by == horizon and 0 or 1
    if #shown == 0 then
      set_head(queue) -- a shard the claim passes over holds its head right too
    end
  end
end
return out
