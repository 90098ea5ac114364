-- attempts.lua: read a timer and its attempt history, newest first.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] id  ARGV[3] most attempts to read
-- returns: {record, attempt JSON, ...}, or {0} when there is no timer (a done one past its
--          retention reads as absent)
-- read-only; bounded by ARGV[3]
local r, raw = load(ARGV[2])
if r == nil or expired(r, ARGV[1]) then
  return {0}
end
local results = redis.call('LRANGE', TAG .. ':a:' .. ARGV[2], 0, tonumber(ARGV[3]) - 1)
table.insert(results, 1, raw)
return results
