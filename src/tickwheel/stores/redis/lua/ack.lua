-- ack.lua: mark leased timers done and keep them until their retention ends.
-- KEYS[1..8] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] expiry_ms (now + retention)  then pairs: id, token
-- returns: one entry per pair: 1 when acked, 0 when the token no longer holds the lease
--          (nothing changed for that one)
-- bounded by the number of pairs, which the store caps per call
local now, expiry = ARGV[1], ARGV[2]
local results = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local r = settle(id, ARGV[i + 1])
  if r == nil then
    results[#results + 1] = 0
  else
    move_state(id, r, DONE)
    r.updated = now
    save(id, r)
    redis.call('ZADD', EXPIRY, expiry, id)
    results[#results + 1] = 1
  end
end
return results
