-- release.lua: return expired leases to scheduled (their holder is presumed dead).
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  then per expired batch: its name (<deadline>|<queue>), the number k of its
--         members listed, then k pairs: member (<lease seq><id>), new seq (9 base-62 digits)
-- returns: the number returned; a member no longer leased (settled, extended) is skipped, and
--          a batch not yet expired is skipped whole
-- the attempt and first claim time stay: the next claim raises the attempt, so the dead
-- holder's token goes stale. A batch goes once no lease is left in it (lib.lua finish()).
-- Bounded by the number of pairs, which the store caps per call.
local now = ARGV[1]
local released = 0
local p = placer(now, 2, true)
local i = 2
while i <= #ARGV do
  local name, k = ARGV[i], tonumber(ARGV[i + 1])
  local deadline = redis.call('ZSCORE', LEASES, name)
  if deadline and tonumber(deadline) <= tonumber(now) then
    for n = i + 2, i + 2 * k, 2 do
      local member = ARGV[n]
      local id = string.sub(member, SEQ_DIGITS + 1)
      local r = load(id)
      if r ~= nil and r.state == LEASED and r.seq == string.sub(member, 1, SEQ_DIGITS) ..
        string.match(name, '^[^|]*') then
        unhold(r)
        r.state, r.updated, r.seq = SCHEDULED, now, ARGV[n + 1]
        save(id, r)
        put(p, r.queue, id, r.due, r.seq)
        count(LEASED, r.queue, -1)
        count(SCHEDULED, r.queue, 1)
        released = released + 1
      end
    end
  end
  i = i + 2 + 2 * k
end
flush(p)
finish()
return released
