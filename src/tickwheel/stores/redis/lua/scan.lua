-- scan.lua: page through a shard's timers (of one state, or all; of one queue, or all; due in
-- a range, or at any time).
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] where to start: an HSCAN cursor ('0' from the start); for dead letters a
--         ZRANGEBYLEX bound ('-' from the start)  ARGV[2] matches to skip at that cursor
--         (where an earlier page stopped)  ARGV[3] limit  ARGV[4] state code ('0'..'4'), or
--         '' for every state  ARGV[5] now_ms  ARGV[6] budget: HSCAN steps (of ~100 records)
--         or dead letters read (in hundreds) per call  ARGV[7] queue, or '' for every queue
--         ARGV[8] due from (ms, inclusive) or ''  ARGV[9] due before (ms, exclusive) or ''
-- only timers that match every filter count as matches (and for ARGV[2])
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
local queue, due_from, due_to = ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local filtered = queue ~= '' or due_from ~= nil or due_to ~= nil
-- whether a record is of the queue and due in the range asked for
local function wanted(raw)
  if not filtered then
    return true
  end
  local due, q = string.match(raw, '^%d,%d+,(%w+),%w+,%d*,%w+,([^,|]*),')
  if queue ~= '' and (q == '' and DEFAULT_QUEUE or q) ~= queue then
    return false
  end
  local d = due_of(due)
  return (due_from == nil or d >= due_from) and (due_to == nil or d < due_to)
end
local out = {}
if state == DEAD then
  local read, budget = 0, tonumber(ARGV[6]) * 100
  while true do
    local ids = redis.call('ZRANGEBYLEX', DEAD_SET, cursor, '+', 'LIMIT', 0, limit)
    if #ids == 0 then
      return { out, cursor, 0, 1 }
    end
    local raws = records_of(ids)
    for i, id in ipairs(ids) do
      cursor = '(' .. id
      if raws[i] and wanted(raws[i]) then
        out[#out + 1] = id
        out[#out + 1] = raws[i]
        if #out == 2 * limit then
          return { out, cursor, 0, 0 }
        end
      end
    end
    read = read + #ids
    if #ids < limit then
      return { out, cursor, 0, 1 }
    end
    if read >= budget then
      return { out, cursor, 0, 0 }
    end
  end
end
if state == LEASED then
  local seen = {}
  for _, name in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do
    local deadline, queue = string.match(name, '^([^|]*)|(.*)$')
    local ids = redis.call('LRANGE', batch_key(queue, deadline), 0, -1)
    local raws = #ids > 0 and records_of(ids) or {}
    for n, id in ipairs(ids) do
      local raw = raws[n]
      if raw and not seen[id] and string.sub(raw, 1, 1) == LEASED and wanted(raw) then
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
    if (state == '' or code == state) and (code ~= DONE or not expired(parse(raw), now))
      and wanted(raw) then
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
