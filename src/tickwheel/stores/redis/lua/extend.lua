-- extend.lua: move a lease's deadline, ordering it after the leases already at that deadline.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] token  ARGV[3] deadline_ms  ARGV[4] new lease seq (9 base-62 digits)
-- returns: 1 when extended, 0 when the token no longer holds the lease (nothing changed)
-- the timer moves to the batch of its new deadline; its entry in the old one goes stale
local id = ARGV[1]
local r = settle(id, ARGV[2])
if r == nil then
  return 0
end
unhold(r)
hold(r, id, ARGV[4], ARGV[3])
save(id, r)
finish()
return 1
