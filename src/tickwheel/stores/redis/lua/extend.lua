-- extend.lua: move a lease's deadline, ordering it after the leases already at that deadline.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] id  ARGV[2] token  ARGV[3] deadline_ms  ARGV[4] new lease seq (9 base-62 digits)
-- returns: 1 when extended, 0 when the token no longer holds the lease (nothing changed)
local extended = extend_lease(ARGV[1], ARGV[2], ARGV[4], ARGV[3])
finish()
return extended and 1 or 0
