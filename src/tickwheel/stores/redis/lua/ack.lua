-- ack.lua: mark a leased timer done and keep it until its retention ends.
-- KEYS[1..8] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] token  ARGV[3] now_ms  ARGV[4] expiry_ms (now + retention)
-- returns: 1 when acked, 0 when the token no longer holds the lease (nothing changed)
local id = ARGV[1]
local r = settle(id, ARGV[2])
if r == nil then
  return 0
end
move_state(id, r, DONE)
r.updated = ARGV[3]
save(id, r)
redis.call('ZADD', EXPIRY, ARGV[4], id)
return 1
