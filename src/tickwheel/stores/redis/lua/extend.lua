-- extend.lua: move a lease's deadline, ordering it after the leases already at that deadline.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] token  ARGV[3] deadline_ms  ARGV[4] new lease seq (9 base-62 digits, record.py)
-- returns: 1 when extended, 0 when the token no longer holds the lease (nothing changed)
local id = ARGV[1]
local r = settle(id, ARGV[2])
if r == nil then
  return 0
end
r.seq = ARGV[4]
save(id, r)
lease(id, r, ARGV[3])
return 1
