-- release.lua: return expired leases to scheduled (their holder is presumed dead).
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  then pairs: lease member (<lease seq><id>), new seq (9 base-62 digits, record.py)
-- returns: the number returned; a member no longer leased, or not yet expired, is skipped
-- the attempt and first claim time stay: the next claim raises the attempt, so the dead
-- holder's token goes stale
-- bounded by the number of pairs, which the store caps per call
local now = ARGV[1]
local released = 0
for i = 2, #ARGV, 2 do
  local member = ARGV[i]
  local deadline = redis.call('ZSCORE', LEASES, member)
  if deadline and tonumber(deadline) <= tonumber(now) then
    redis.call('ZREM', LEASES, member)
    local id = string.sub(member, SEQ_DIGITS + 1)
    local r = load(id)
    if r ~= nil and r.state == LEASED and r.seq .. id == member then
      unlease(id, r)
      move_state(id, r, SCHEDULED)
      r.updated, r.seq = now, ARGV[i + 1]
      save(id, r)
      enqueue(id, r)
      released = released + 1
    end
  end
end
return released
