-- extend_many.lua: move the deadlines of many leases to one, as extend.lua moves one.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] deadline_ms, then per lease three: id, token, new lease seq (9 base-62 digits)
-- returns: per lease 1 when extended, 0 when its token no longer holds the lease (nothing
--          changed for that one)
-- bounded by the number of leases, which the store caps per call
local results = {}
for i = 2, #ARGV, 3 do
  results[#results + 1] = extend_lease(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[1]) and 1 or 0
end
finish()
return results
