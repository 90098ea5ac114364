-- ack.lua: mark leased timers done and keep them until their retention ends.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] expiry_ms (now + retention)  then pairs: id, token
-- returns: one entry per pair: 1 when acked, 0 when the token no longer holds the lease
--          (nothing changed for that one; an id repeated in the call is acked once)
-- bounded by the number of pairs, which the store caps per call; one HMGET, then one
-- variadic write per key
local now, expiry = ARGV[1], ARGV[2]
local ids = {}
for i = 3, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
end
local raws = redis.call('HMGET', RECORDS, unpack(ids))
local results, acked = {}, {}
local records, expiries, leases, queue_leases = {}, {}, {}, {}
for n, id in ipairs(ids) do
  local r = raws[n] and parse(raws[n])
  if not r or r.state ~= LEASED or r.attempt ~= ARGV[2 + 2 * n] or acked[id] then
    results[n] = 0
  else
    acked[id] = true
    results[n] = 1
    local member = r.seq .. id
    r.state, r.updated = DONE, now
    records[#records + 1] = id
    records[#records + 1] = pack(r)
    expiries[#expiries + 1] = expiry
    expiries[#expiries + 1] = id
    leases[#leases + 1] = member
    local members = queue_leases[r.queue] or {}
    queue_leases[r.queue] = members
    members[#members + 1] = member
  end
end
if #records > 0 then
  bulk('HSET', RECORDS, records)
  bulk('ZREM', LEASES, leases)
  for queue, members in pairs(queue_leases) do
    bulk('ZREM', lease_key(queue), members)
  end
  bulk('ZADD', EXPIRY, expiries)
end
return results
