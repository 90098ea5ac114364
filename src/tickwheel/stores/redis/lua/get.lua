-- get.lua: read timers by id; a done timer past its retention reads as absent.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2], ARGV[3], ... ids
-- returns: one entry per id: its record, or 0 when there is none
-- read-only; bounded by the number of ids, which the store caps per call
local now = ARGV[1]
local results = {}
for i = 2, #ARGV do
  local r, raw = load(ARGV[i])
  if r == nil or expired(r, now) then
    results[#results + 1] = 0
  else
    results[#results + 1] = raw
  end
end
return results
