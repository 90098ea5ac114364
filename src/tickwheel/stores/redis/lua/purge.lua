-- purge.lua: delete done timers whose retention has ended.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] limit
-- returns: the number of done-list entries read (under ARGV[2]: no more are due); the list
--          is in ack order, so it stops at the first entry whose retention lasts; an entry
--          whose timer changed since (re-added, acked again) is dropped
local entries = redis.call('LRANGE', DONE_LIST, 0, tonumber(ARGV[2]) - 1)
local now = tonumber(ARGV[1])
local read, ids, expiries = 0, {}, {}
for _, entry in ipairs(entries) do
  local expiry, id = string.match(entry, '^(%d+),(.*)$')
  if tonumber(expiry) > now then
    break
  end
  read = read + 1
  ids[#ids + 1] = id
  expiries[#expiries + 1] = expiry
end
if read == 0 then
  return 0
end
local raws = redis.call('HMGET', RECORDS, unpack(ids))
local gone, seen = {}, {}
for n, id in ipairs(ids) do
  local raw = raws[n]
  if raw and not seen[id] and string.sub(raw, 1, 1) == DONE and parse(raw).seq == expiries[n] then
    seen[id] = true
    gone[#gone + 1] = id
  end
end
if #gone > 0 then
  redis.call('HDEL', RECORDS, unpack(gone))
  count(DONE, -#gone)
  finish()
end
redis.call('LTRIM', DONE_LIST, read, -1)
return read
