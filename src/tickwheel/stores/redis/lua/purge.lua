-- purge.lua: delete done timers whose retention has ended.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] limit
-- returns: the most done-list entries read from one of the two lists (under ARGV[2]: no
--          more are due in either)
-- Done occurrences of schedules have a list of their own, <tag>:xo, as their retention may be
-- shorter (each list is in expiry order). A done list is in ack order: a mark @<expiry ms>,
-- then the ids acked with that expiry; it stops at the first mark still in the future. An id whose timer changed since (re-added,
-- acked again) is dropped. When it stops inside a group, the group's mark goes back in front.
local now = tonumber(ARGV[1])

local function purge(list)
  local head = redis.call('LINDEX', list, 0)
  if not head or tonumber(string.sub(head, 2)) > now then
    return 0 -- nothing is due (the list starts with a mark)
  end
  local entries = redis.call('LRANGE', list, 0, tonumber(ARGV[2]) - 1)
  local read, expiry, ids, expiries = 0, nil, {}, {}
  for _, entry in ipairs(entries) do
    if string.sub(entry, 1, 1) == '@' then
      if tonumber(string.sub(entry, 2)) > now then
        break
      end
      expiry = string.sub(entry, 2)
    elseif expiry ~= nil then
      ids[#ids + 1] = entry
      expiries[#ids] = expiry
    end
    read = read + 1
  end
  if read == 0 then
    return 0
  end
  redis.call('LTRIM', list, read, -1)
  local next_entry = redis.call('LINDEX', list, 0)
  if expiry ~= nil and next_entry and string.sub(next_entry, 1, 1) ~= '@' then
    redis.call('LPUSH', list, '@' .. expiry)
  end
  if #ids > 0 then
    local raws = records_of(ids)
    local gone, seen, histories = {}, {}, {}
    for n, id in ipairs(ids) do
      local raw = raws[n]
      if raw and not seen[id] and string.sub(raw, 1, 1) == DONE then
        local r = parse(raw)
        if r.seq == expiries[n] then
          seen[id] = true
          gone[#gone + 1] = id
          histories[#gone] = TAG .. ':a:' .. id
          count(DONE, r.queue, -1)
        end
      end
    end
    if #gone > 0 then
      redis.call('HDEL', RECORDS, unpack(gone))
      redis.call('DEL', unpack(histories)) -- attempt histories go with their timers
      finish()
    end
  end
  return read
end

return math.max(purge(DONE_LIST), purge(TAG .. ':xo'))
