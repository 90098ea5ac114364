-- purge_queue.lua: delete a queue's timers of one state in this shard, a bounded part a call.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] queue  ARGV[2] state code: '0' scheduled, '4' paused, '3' dead
-- ARGV[3] cursor: '0' to start, else the one the last call returned  ARGV[4] entries to read
-- returns: {timers deleted, cursor}: the cursor is '' once the shard holds no more of them
-- Scheduled timers are found through the queue's wheel: its slots, first to last, each emptied
-- a part at a time (stale day-slot entries dropped), then its near set in member order (cursor
-- 'n<last member read>'). A schedule's pending occurrence stays: one found in a slot moves to
-- the near set (exact, and claimed from there all the same), where the walk passes over it.
-- Paused timers have no index: the records hash is walked (an HSCAN cursor). Dead letters are
-- walked in id order (a ZRANGEBYLEX cursor). Leased and done timers are never touched.
local queue, state, cursor, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local deleted = 0

local function plain(id)
  return string.find(id, '@', 1, true) == nil
end

local function drop_scheduled(ids)
  if #ids > 0 then
    bulk('HDEL', RECORDS, ids)
    count(SCHEDULED, queue, -#ids)
    deleted = deleted + #ids
  end
end

-- read up to `budget` entries of the queue's first slot; returns how many were read, or nil
-- when the queue has no slot left
local function purge_slot(budget)
  local level, start, member = first_slot(queue)
  if level == nil then
    return nil
  end
  local key = slot_key(queue, level, member)
  local ids = redis.call('LRANGE', key, 0, budget - 1)
  local raws = #ids > 0 and records_of(ids) or {}
  local high = start + slot_width(level)
  local seen, gone, near = {}, {}, {}
  for i, id in ipairs(ids) do
    local raw = raws[i]
    if raw and not seen[id] then
      seen[id] = true
      local due, seq, q = scheduled_fields(raw)
      local d = due and due_of(due)
      if q == queue and d >= start and d < high then
        if plain(id) then
          gone[#gone + 1] = id
        else
          near[#near + 1] = int(d)
          near[#near + 1] = near_member(due, seq, id)
        end
      end
    end
  end
  if #ids < budget then
    redis.call('DEL', key)
    redis.call('ZREM', index_key(queue, level), member)
  else
    redis.call('LTRIM', key, budget, -1)
  end
  if #near > 0 then
    bulk('ZADD', near_key(queue), near)
  end
  drop_scheduled(gone)
  return #ids
end

-- read up to `budget` members of the near set after the cursor; returns the next cursor
local function purge_near(budget)
  local from = string.sub(cursor, 1, 1) == 'n' and '(' .. string.sub(cursor, 2) or '-'
  local members = redis.call('ZRANGEBYLEX', near_key(queue), from, '+', 'LIMIT', 0, budget)
  if #members == 0 then
    return ''
  end
  local ids = {}
  for i, m in ipairs(members) do
    ids[i] = string.sub(m, 2 + tonumber(string.sub(m, 1, 1), 36) + SEQ_DIGITS)
  end
  local raws = records_of(ids)
  local gone, gone_members = {}, {}
  for i, id in ipairs(ids) do
    local raw = raws[i]
    if raw and plain(id) then
      local due, seq, q = scheduled_fields(raw)
      if q == queue and near_member(due, seq, id) == members[i] then
        gone[#gone + 1] = id
        gone_members[#gone_members + 1] = members[i]
      end
    end
  end
  if #gone_members > 0 then
    bulk('ZREM', near_key(queue), gone_members)
  end
  drop_scheduled(gone)
  if #members < budget then
    return ''
  end
  return 'n' .. members[#members]
end

if state == SCHEDULED then
  local read = 0
  if cursor == '0' then
    while read < limit do
      local n = purge_slot(limit - read)
      if n == nil then
        break
      end
      read = read + n
    end
  end
  if read < limit then
    cursor = purge_near(limit - read)
  end
  set_head(queue)
  unlist_queue(queue)
elseif state == DEAD then
  local ids = redis.call('ZRANGEBYLEX', DEAD_SET, cursor == '0' and '-' or cursor, '+', 'LIMIT',
    0, limit)
  local raws = #ids > 0 and records_of(ids) or {}
  for i, id in ipairs(ids) do
    if raws[i] then
      local r = parse(raws[i])
      if r.state == DEAD and r.queue == queue then
        forget(id, r)
        deleted = deleted + 1
      end
    end
  end
  cursor = #ids < limit and '' or '(' .. ids[#ids]
elseif state == PAUSED then
  for _ = 1, math.max(1, math.floor(limit / 100)) do
    local reply = redis.call('HSCAN', RECORDS, cursor, 'COUNT', 100)
    local fields = reply[2]
    for i = 1, #fields, 2 do
      if string.sub(fields[i + 1], 1, 1) == PAUSED then
        local r = parse(fields[i + 1])
        if r.queue == queue then
          forget(fields[i], r)
          deleted = deleted + 1
        end
      end
    end
    cursor = reply[1]
    if cursor == '0' then
      cursor = ''
      break
    end
  end
else
  return redis.error_reply('purge_queue: state must be 0, 3 or 4')
end
finish()
return { deleted, cursor }
