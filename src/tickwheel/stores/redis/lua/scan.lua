-- scan.lua: page through a shard's timers (of one state, or all).
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] where to start: an HSCAN cursor ('0' from the start); for dead letters a
--         ZRANGEBYLEX bound ('-' from the start)  ARGV[2] matches to skip at that cursor
--         (where an earlier page stopped)  ARGV[3] limit  ARGV[4] state code ('0'..'3'), or
--         '' for every state  ARGV[5] now_ms  ARGV[6] budget: HSCAN steps per call
-- returns: {{id1, record1, ...}, cursor, skip, 1 when the shard has no more else 0}: at most
--          ARGV[3] timers; call again with cursor and skip to go on. Leased timers: all of the
--          shard's, in no order (the store sorts them by id and pages through them)
-- read-only. Dead letters come in id order from their set, leased timers from the lease
-- batches (as many as are in flight); the rest in the records hash's order, with HSCAN's
-- guarantee: a timer present for the whole walk is returned, one added or deleted during it
-- may or may not be, and a walk across a rehash may see a timer twice. Filtering a rare state
-- (done) reads ARGV[6] HSCAN steps per call.
local cursor, skip, limit, state, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4],
  ARGV[5]
local out = {}
if state == DEAD then
  local ids = redis.call('ZRANGEBYLEX', DEAD_SET, cursor, '+', 'LIMIT', 0, limit)
  if #ids > 0 then
    local raws = records_of(ids)
    for i, id in ipairs(ids) do
      out[#out + 1] = id
      out[#out + 1] = raws[i]
    end
  end
  if #ids < limit then
    return { out, cursor, 0, 1 }
  end
  return { out, '(' .. ids[#ids], 0, 0 }
end
if state == LEASED then
  local seen = {}
  for _, name in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do
    local deadline, queue = string.match(name, '^([^|]*)|(.*)$')
    local ids = redis.call('LRANGE', batch_key(queue, deadline), 0, -1)
    local raws = #ids > 0 and records_of(ids) or {}
    for n, id in ipairs(ids) do
      local raw = raws[n]
      if raw and not seen[id] and string.sub(raw, 1, 1) == LEASED then
        local r = parse(raw)
        if r.queue == queue and string.sub(r.seq, SEQ_DIGITS + 1) == deadline then
          seen[id] = true
          out[#out + 1] = id
          out[#out + 1] = raw
        end
      end
    end
  end
  return { out, cursor, 0, 1 }
end
for _ = 1, tonumber(ARGV[6]) do
  local reply = redis.call('HSCAN', RECORDS, cursor, 'COUNT', 100)
  local fields = reply[2]
  local matched = 0
  for i = 1, #fields, 2 do
    local raw = fields[i + 1]
    local code = string.sub(raw, 1, 1)
    if (state == '' or code == state) and (code ~= DONE or not expired(parse(raw), now)) then
      matched = matched + 1
      if matched > skip then
        out[#out + 1] = fields[i]
        out[#out + 1] = raw
        if #out == 2 * limit then
          return { out, cursor, matched, 0 }
        end
      end
    end
  end
  skip = 0
  cursor = reply[1]
  if cursor == '0' then
    return { out, cursor, 0, 1 }
  end
end
return { out, cursor, 0, 0 }
