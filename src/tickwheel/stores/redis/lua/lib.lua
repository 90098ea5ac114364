-- lib.lua: helpers of every tickwheel script (the store prepends to each the parts it uses).
-- Every script receives its shard's fixed keys as KEYS[1..6]:
--   KEYS[1] records hash (id → record)   KEYS[2] lease batches (<deadline>|<queue> → deadline)
--   KEYS[3] done list (@<expiry ms>, then the ids acked with it)   KEYS[4] counts hash
--   (<code>|<queue> → the queue's timers in that state; <deadline>|<queue> → leases that
--   batch still holds)
--   KEYS[5] dead letters (id, score 0)   KEYS[6] set of queues that have timers here
-- Schedule scripts receive two more: KEYS[7] schedules hash (id → encoded schedule, which Lua
--   never decodes)   KEYS[8] schedule ids (score 0, so in id order)
-- Queue, slot and batch keys depend on data read inside the script (a record's queue and due
-- time), so they are built here from the hash tag of KEYS[1]: every key a script touches
-- shares a slot. Numbers stay decimal strings; arithmetic results are formatted with '%d'
-- (never %.14g, which redis.call would apply to a Lua number).

local RECORDS, LEASES, DONE_LIST, COUNTS, DEAD_SET, QUEUES = KEYS[1], KEYS[2], KEYS[3],
  KEYS[4], KEYS[5], KEYS[6]
local SCHEDULES, SCHEDULE_IDS = KEYS[7], KEYS[8]
local SCHEDULED, LEASED, DONE, DEAD, PAUSED = '0', '1', '2', '3', '4'
local TAG = string.match(RECORDS, '^{[^}]*}')
-- the store's wake channel, <prefix>:wake (a channel is no key: it has no slot)
local WAKE = string.match(TAG, '^{(.*):%d+}$') .. ':wake'
local SEQ_DIGITS = 9 -- base 62 (record.py)
local DEFAULT_QUEUE = 'default' -- stored as an empty field
-- The wheel's two levels: minute slots for timers due within the hour, day slots beyond; a
-- day slot moves into minute slots an hour before it starts, a minute slot into the queue's
-- near set when a claim's horizon reaches it. Slots are unordered lists, so an add costs one
-- RPUSH and no search; only the near set, which a claim reads, is ordered.
local MINUTE_SLOT, DAY_SLOT, MINUTE_RANGE = 60000, 86400000, 3600000
local CASCADE_BUDGET = 4000 -- slot entries one call moves at most (unpack() takes ~8,000)

local function int(n)
  return string.format('%d', n)
end

-- `command key args...` over a long list, in slices unpack() can take; slices are even, so
-- field/value and score/member pairs stay whole
local function bulk(command, key, args)
  for i = 1, #args, 4000 do
    redis.call(command, key, unpack(args, i, math.min(i + 3999, #args)))
  end
end

-- Counts per state and queue, and per lease batch (KEYS[4]), change by deltas gathered during
-- a call and written once by finish(), which every script that changes a state calls before it
-- returns: a call that touches one queue writes one field per state it changes, as many as a
-- count per state alone would.
local deltas = {}
local function count(state, queue, n)
  local per_queue = deltas[state]
  if per_queue == nil then
    per_queue = {}
    deltas[state] = per_queue
  end
  per_queue[queue] = (per_queue[queue] or 0) + n
end

-- the records of many ids, in slices unpack() can take
local function records_of(ids)
  if #ids <= 4000 then
    return redis.call('HMGET', RECORDS, unpack(ids))
  end
  local raws = {}
  for i = 1, #ids, 4000 do
    local part = redis.call('HMGET', RECORDS, unpack(ids, i, math.min(i + 3999, #ids)))
    for n = 1, #part do
      raws[i + n - 1] = part[n]
    end
  end
  return raws
end

local function queue_key(queue, suffix)
  return TAG .. ':q:' .. queue .. ':' .. suffix
end

-- a queue's scheduled timers that are due soon (or were cascaded): <due key><seq><id> → due
-- ms, exact
local function near_key(queue)
  return queue_key(queue, 'n')
end

-- A near-set member starts with its due time, so that members alone sort as (due, seq) and a
-- claim reads them without scores (Redis 7.0 formats each score with sprintf('%.17g')): the
-- record's base-36 due (8 digits, more from 2059 on) after one base-36 digit giving its length
local DUE_LENGTH = { [8] = '8', [9] = '9', [10] = 'a', [11] = 'b' }
local function near_member(due, seq, id)
  return DUE_LENGTH[#due] .. due .. seq .. id
end

-- the index of a queue's slots of one level: start ms → start ms
local function index_key(queue, level)
  return queue_key(queue, 'i' .. level)
end

-- a slot: a list of the ids of timers due from <start> for one slot width, unordered; a timer
-- leaving a minute slot takes its entry with it, one leaving a day slot leaves it stale
local function slot_key(queue, level, start)
  return queue_key(queue, level .. ':' .. start)
end

-- a queue's lease deadlines (deadline → deadline), those of its batches in LEASES: for
-- next_due.lua
local function lease_key(queue)
  return queue_key(queue, 'l')
end

-- The first entry of a zset whose members are their own scores (a slot index, a queue's lease
-- deadlines) as a number, nil when empty; and the due time of a queue's first near member,
-- which begins with it. Both read members only: Redis 7.0 formats each score it returns with
-- sprintf('%.17g'), which costs more than the rest of such a read.
local function first_number(key)
  return tonumber(redis.call('ZRANGE', key, 0, 0)[1])
end

local function first_near(queue)
  local member = redis.call('ZRANGE', near_key(queue), 0, 0)[1]
  if member == nil then
    return nil
  end
  return tonumber(string.sub(member, 2, 1 + tonumber(string.sub(member, 1, 1), 36)), 36)
end

-- The shard's queue heads (queue → ms, for due_queues): per queue with scheduled or leased
-- timers here, a time by which it may hold something to claim, never later than its earliest
-- due time or lease deadline. Whatever schedules a timer lowers it (flush(), add_one.lua); a
-- claim sets it from the queue's first near member, slot starts and lease deadlines (a slot's
-- start is a lower bound of its timers), or drops a queue that holds nothing here.
local HEADS = TAG .. ':h'

local function lower_head(queue, d)
  redis.call('ZADD', HEADS, 'LT', int(d), queue)
end

local function set_head(queue)
  local at = first_near(queue)
  for _, key in ipairs({ index_key(queue, 1), index_key(queue, 2), lease_key(queue) }) do
    local start = first_number(key)
    if start ~= nil and (at == nil or start < at) then
      at = start
    end
  end
  if at == nil then
    redis.call('ZREM', HEADS, queue)
  else
    redis.call('ZADD', HEADS, int(at), queue)
  end
end

-- A lease batch: the timers of one queue leased until one deadline, as a list of their ids
-- (one claim's, or more at the same deadline). Acks leave their entries; the batch's count in
-- KEYS[4] says how many still hold a lease, and the batch goes at 0.
local function batch_name(queue, deadline)
  return deadline .. '|' .. queue
end

local function batch_key(queue, deadline)
  return TAG .. ':b:' .. queue .. ':' .. deadline
end

-- record: "<state>,<attempt>,<due>,<created>,<updated>,<seq>,<queue>,<first claimed>,<errlen>
--          [.<deferrals>]|<error><spec>" (record.py): due and created are base 36 (only Python
-- writes them;
-- Lua reads due with due_of() and passes created through);
-- updated is empty until a change, the queue empty for 'default', first claimed and errlen
-- empty when unset. A leased timer's seq is <lease seq><lease deadline ms>, a done timer's the
-- ms its retention ends.
local function parse(raw)
  local state, attempt, due, created, updated, seq, queue, first, errlen, deferrals, body =
    string.match(raw, '^(%d),(%d+),(%w+),(%w+),(%d*),(%w+),([^,|]*),(%d*),(%d*)%.?(%d*)|()')
  if not state then
    error('tickwheel: corrupt record ' .. string.sub(raw, 1, 60))
  end
  if queue == '' then
    queue = DEFAULT_QUEUE
  end
  return { state = state, attempt = attempt, due = due, created = created, updated = updated,
           seq = seq, queue = queue, first = first, errlen = errlen, deferrals = deferrals,
           body = string.sub(raw, body) }
end

local function pack(r)
  local queue = r.queue
  if queue == DEFAULT_QUEUE then
    queue = ''
  end
  local errlen = r.errlen
  if r.deferrals ~= '' then
    errlen = errlen .. '.' .. r.deferrals
  end
  return table.concat({ r.state, r.attempt, r.due, r.created, r.updated, r.seq, queue,
                        r.first, errlen }, ',') .. '|' .. r.body
end

-- a new record (no error: its header ends ',|') with the deferrals of the timer it replaces
local function with_deferrals(raw, deferrals)
  if deferrals == '' then
    return raw
  end
  local at = string.find(raw, '|', 1, true)
  return string.sub(raw, 1, at - 1) .. '.' .. deferrals .. string.sub(raw, at)
end

-- a record's due time (base 36) in ms
local function due_of(text)
  return tonumber(text, 36)
end

-- due (base 36), seq and queue of a scheduled record, without parsing the rest; nil for
-- other states
local function scheduled_fields(raw)
  local due, seq, queue = string.match(raw, '^0,%d+,(%w+),%w+,%d*,(%w+),([^,|]*),')
  if queue == '' then
    queue = DEFAULT_QUEUE
  end
  return due, seq, queue
end

-- the record under id, parsed, and its raw text; nil when there is none
local function load(id)
  local raw = redis.call('HGET', RECORDS, id)
  if not raw then
    return nil, nil
  end
  return parse(raw), raw
end

local function save(id, r)
  local raw = pack(r)
  redis.call('HSET', RECORDS, id, raw)
  return raw
end

local function set_error(r, message)
  r.body = message .. string.sub(r.body, (tonumber(r.errlen) or 0) + 1)
  r.errlen = int(#message)
end

-- a done timer past its retention is gone for readers even before purge.lua deletes it
local function expired(r, now_ms)
  return r.state == DONE and tonumber(r.seq) <= tonumber(now_ms)
end

-- the first slot of a queue over both levels: level, start (a number) and the index member
local function first_slot(queue)
  local level, start, member = nil, nil, nil
  for _, l in ipairs({ 1, 2 }) do
    local found = redis.call('ZRANGE', index_key(queue, l), 0, 0)[1]
    if found ~= nil and (start == nil or tonumber(found) < start) then
      level, start, member = l, tonumber(found), found
    end
  end
  return level, start, member
end

local function slot_width(level)
  return level == 1 and MINUTE_SLOT or DAY_SLOT
end


-- before timers due at `due` join a queue: whether to tell its waiters (Store.wait), because
-- they may become its earliest here. A slot's timers are unordered, so a due time inside the
-- first minute slot's range counts as earlier, and day slots (which may hold only stale
-- entries) are not looked at: a spurious wake costs a waiter one look; a missed one, lateness.
local function wakes(queue, d)
  local near = first_near(queue)
  local start = first_number(index_key(queue, 1))
  return (near == nil or d < near) and (start == nil or d < start + MINUTE_SLOT)
end

-- A placer gathers scheduled timers and writes them with one variadic command per key: into
-- the queue's near set when due before the end of the current minute (`now`'s), else into
-- the slot of their due time: a day slot if that day starts over MINUTE_RANGE from now, else
-- a minute slot (a day slot that near would have to move down at the next claim, all of it
-- before any later timer could be claimed); `max_level` 0 forces the near set (a slot a claim
-- reached), 1 minute slots at most (a day slot moving down).
local function placer(now, max_level, wakes)
  local n = tonumber(now)
  return { now = n, soon = n - n % MINUTE_SLOT + MINUTE_SLOT, max_level = max_level,
           wakes = wakes, near = {}, slots = {}, starts = {}, soonest = {} }
end

-- (`due` is a record's base-36 text)
local function put(p, queue, id, due, seq)
  local d = due_of(due)
  if p.wakes and (p.soonest[queue] == nil or d < p.soonest[queue]) then
    p.soonest[queue] = d
  end
  if d < p.soon or p.max_level == 0 then
    local entries = p.near[queue] or {}
    p.near[queue] = entries
    entries[#entries + 1] = int(d)
    entries[#entries + 1] = near_member(due, seq, id)
    return
  end
  local level = 1
  if p.max_level == 2 and d - d % DAY_SLOT > p.now + MINUTE_RANGE then
    level = 2
  end
  local start = int(d - d % slot_width(level))
  local key = slot_key(queue, level, start)
  local ids = p.slots[key]
  if ids == nil then
    ids = {}
    p.slots[key] = ids
    p.starts[key] = { queue, level, start }
  end
  ids[#ids + 1] = id
end

-- the queues to wake go out as one message, their names separated by spaces (a queue name
-- has none): a large add wakes a thousand queues with one PUBLISH, not a thousand
local function flush(p)
  local woken = {}
  for queue, d in pairs(p.soonest) do
    if wakes(queue, d) then
      woken[#woken + 1] = queue
    end
    lower_head(queue, d)
    redis.call('SADD', QUEUES, queue)
  end
  if #woken > 0 then
    redis.call('PUBLISH', WAKE, table.concat(woken, ' '))
  end
  for queue, entries in pairs(p.near) do
    bulk('ZADD', near_key(queue), entries)
  end
  for key, ids in pairs(p.slots) do
    local where = p.starts[key]
    if redis.call('RPUSH', key, unpack(ids)) == #ids then
      redis.call('ZADD', index_key(where[1], where[2]), where[3], where[3])
    end
  end
end

-- schedule one timer (its record saved), waking its queue's waiters as needed
local function enqueue(id, r, now)
  local p = placer(now, 2, true)
  put(p, r.queue, id, r.due, r.seq)
  flush(p)
end

-- Move up to `budget` entries of a slot one level down (day → minute slots, minute → the
-- near set); returns how many were read. Each entry is checked
-- against its record (scheduled in this queue, due in the slot): stale entries of a day slot
-- are dropped, and a timer listed twice lands once.
local function cascade(queue, level, member, now, budget)
  local key = slot_key(queue, level, member)
  local ids = redis.call('LRANGE', key, 0, budget - 1)
  if #ids > 0 then
    local raws = records_of(ids)
    local low = tonumber(member)
    local high = low + slot_width(level)
    local p = placer(now, level - 1, false)
    local seen = {}
    for i, id in ipairs(ids) do
      local raw = raws[i]
      if raw and not seen[id] then
        seen[id] = true
        local due, seq, q = scheduled_fields(raw)
        local d = due and due_of(due)
        if q == queue and d >= low and d < high then
          put(p, queue, id, due, seq)
        end
      end
    end
    flush(p)
  end
  if #ids < budget then
    redis.call('DEL', key)
    redis.call('ZREM', index_key(queue, level), member)
  else
    redis.call('LTRIM', key, budget, -1)
  end
  return #ids
end

-- Make the near set hold every timer of the queue due by `horizon`, at most CASCADE_BUDGET
-- entries per call: first what the claim needs (day slots, then minute slots, starting by the
-- horizon), then, with the budget left, day slots starting within the minute range move down
-- ahead of time, so a big day slot coming near never holds back timers due now. Returns the
-- horizon to claim by: lower than asked while a slot that may hold earlier timers is left.
local function ready(queue, horizon, now)
  local budget = CASCADE_BUDGET
  local h = tonumber(horizon)
  local left = nil -- the earliest slot start by the horizon that could not move
  local empty = {} -- levels read empty stay so: slots move down, level 1 is read after 2's moves
  for _, step in ipairs({ { 2, h }, { 1, h }, { 2, tonumber(now) + MINUTE_RANGE } }) do
    local level, by = step[1], step[2]
    while not empty[level] do
      local first = redis.call('ZRANGE', index_key(queue, level), 0, 0)[1]
      local start = tonumber(first)
      empty[level] = start == nil
      if start == nil or start > by or budget <= 0 then
        if start ~= nil and start <= h and (left == nil or start < left) then
          left = start
        end
        break
      end
      local read = cascade(queue, level, first, now, budget)
      budget = budget - math.max(read, 1)
    end
  end
  if left ~= nil then
    return int(left - 1)
  end
  return horizon
end

-- the earliest due time of a queue's scheduled timers in this shard (nil: none) and whether
-- it is exact: the first slot moves down while it may hold a timer earlier than the near
-- set's first, at most CASCADE_BUDGET entries per call; past that the answer is the first
-- slot's start, a lower bound (call again to go on)
local function earliest(queue, now)
  local budget = CASCADE_BUDGET
  while true do
    local near = first_near(queue)
    local level, start, member = first_slot(queue)
    if start == nil or (near ~= nil and near < start) then
      return near, true
    end
    if budget <= 0 then
      return start, false
    end
    local read = cascade(queue, level, member, now, budget)
    budget = budget - math.max(read, 1)
  end
end

-- the queues set lists the queues with scheduled timers here (stats.lua walks it); a queue
-- with neither those nor leases here has no head either
local function unlist_queue(queue)
  if redis.call('EXISTS', near_key(queue), index_key(queue, 1), index_key(queue, 2)) == 0 then
    redis.call('SREM', QUEUES, queue)
    if redis.call('EXISTS', lease_key(queue)) == 0 then
      redis.call('ZREM', HEADS, queue)
    end
  end
end

-- take a scheduled timer out of its queue: out of the near set, or else out of the minute
-- slot of its due time (LREM reads the slot, which holds a minute's timers). A day slot's
-- entry is left stale: reading a day's timers per cancel would cost more than moving the
-- stale entry once, when the day comes near (cascade() drops it).
local function dequeue(id, r)
  if redis.call('ZREM', near_key(r.queue), near_member(r.due, r.seq, id)) == 0 then
    local d = due_of(r.due)
    local start = int(d - d % MINUTE_SLOT)
    local key = slot_key(r.queue, 1, start)
    if redis.call('LREM', key, 1, id) == 1 and redis.call('EXISTS', key) == 0 then
      redis.call('ZREM', index_key(r.queue, 1), start)
    end
  end
  unlist_queue(r.queue)
end

-- lease changes gathered per batch during a call, written by finish()
local batches = {}
local last_batch = nil -- a call's timers mostly share one batch: skip building its name
local function batch_of(queue, deadline)
  local b = last_batch
  if b ~= nil and b.deadline == deadline and b.queue == queue then
    return b
  end
  local name = batch_name(queue, deadline)
  b = batches[name]
  if b == nil then
    b = { queue = queue, deadline = deadline, delta = 0, entries = {} }
    batches[name] = b
  end
  last_batch = b
  return b
end

-- lease a timer until `deadline` under `lease_seq` (its record is the caller's to write)
local function hold(r, id, lease_seq, deadline)
  local b = batch_of(r.queue, deadline)
  b.delta = b.delta + 1
  b.entries[#b.entries + 1] = id
  r.seq = lease_seq .. deadline
end

-- the timer of leased record r no longer holds its lease
local function unhold(r)
  local b = batch_of(r.queue, string.sub(r.seq, SEQ_DIGITS + 1))
  b.delta = b.delta - 1
end

-- the shard's queues that hold timers in any state, score 0 so in name order (queue_page.lua
-- reads a page of them): a queue joins with its first counts field and leaves with its last
local QUEUE_NAMES = TAG .. ':qn'
local function unname(queue)
  for _, state in ipairs({ SCHEDULED, LEASED, DONE, DEAD, PAUSED }) do
    if redis.call('HEXISTS', COUNTS, state .. '|' .. queue) == 1 then
      return
    end
  end
  redis.call('ZREM', QUEUE_NAMES, queue)
end

-- write the gathered count and lease changes
local function finish()
  for state, per_queue in pairs(deltas) do
    for queue, n in pairs(per_queue) do
      if n ~= 0 then
        local left = redis.call('HINCRBY', COUNTS, state .. '|' .. queue, n)
        if left == 0 then
          redis.call('HDEL', COUNTS, state .. '|' .. queue)
          unname(queue)
        elseif left == n then -- a new field
          redis.call('ZADD', QUEUE_NAMES, 0, queue)
        end
      end
    end
  end
  deltas = {}
  for name, b in pairs(batches) do
    if #b.entries > 0 then
      bulk('RPUSH', batch_key(b.queue, b.deadline), b.entries)
    end
    local left = redis.call('HINCRBY', COUNTS, name, b.delta)
    if left <= 0 then
      redis.call('HDEL', COUNTS, name)
      redis.call('ZREM', LEASES, name)
      redis.call('ZREM', lease_key(b.queue), b.deadline)
      redis.call('DEL', batch_key(b.queue, b.deadline))
    elseif b.delta > 0 then
      redis.call('ZADD', LEASES, b.deadline, name)
      redis.call('ZADD', lease_key(b.queue), b.deadline, b.deadline)
    end
  end
  batches = {}
  last_batch = nil
end

-- the leased record when (id, token) still holds the lease; else nil
local function settle(id, token)
  local r = load(id)
  if r == nil or r.state ~= LEASED or r.attempt ~= token then
    return nil
  end
  return r
end

-- lease a leased timer until `deadline` under a new lease seq, after the leases already at
-- that deadline (it moves to that deadline's batch; its entry in the old one goes stale);
-- false when the token no longer holds the lease. The caller calls finish().
local function extend_lease(id, token, lease_seq, deadline)
  local r = settle(id, token)
  if r == nil then
    return false
  end
  unhold(r)
  hold(r, id, lease_seq, deadline)
  save(id, r)
  return true
end

-- remove every trace of a timer, whatever its state (its entry in a lease batch or in the
-- done list goes stale: both are checked against the record when read)
local function forget(id, r)
  redis.call('DEL', TAG .. ':a:' .. id) -- its attempt history goes with it
  if r.state == SCHEDULED then
    dequeue(id, r)
  elseif r.state == LEASED then
    unhold(r)
  elseif r.state == DEAD then
    redis.call('ZREM', DEAD_SET, id)
  end
  redis.call('HDEL', RECORDS, id)
  count(r.state, r.queue, -1)
end

-- A schedule's occurrence `id` with its new scheduled record `raw` (add.lua's format), placed
-- by placer p (the caller flushes it), unless a timer with that id is scheduled or leased: the
-- occurrence exists already. A done or dead one is replaced. The new record keeps the attempt
-- of the one it replaces, or `attempt` (that of a timer of this id the caller just cancelled),
-- so that no lease on an earlier timer of this id can match a claim of the new one. Returns
-- whether it was created.
local function occur(id, raw, p, attempt)
  local old = load(id)
  if old then
    if old.state == SCHEDULED or old.state == LEASED then
      return false
    end
    forget(id, old)
    attempt = old.attempt
    raw = with_deferrals(raw, old.deferrals)
  end
  if attempt and attempt ~= '0' then
    raw = '0,' .. attempt .. string.sub(raw, 4) -- a new record starts '0,0,'
  end
  local due, seq, queue = scheduled_fields(raw)
  redis.call('HSET', RECORDS, id, raw)
  put(p, queue, id, due, seq)
  count(SCHEDULED, queue, 1)
  return true
end

-- Put a settled attempt (its JSON `record`; '' for none) first in the history <tag>:a:<id> of
-- timer `id`, which keeps its last `most` attempts and lapses `keep_ms` after the newest.
local function record_attempt(id, record, most, keep_ms)
  if record == '' or most == '0' then
    return
  end
  local key = TAG .. ':a:' .. id
  if redis.call('LPUSH', key, record) > tonumber(most) then
    redis.call('LTRIM', key, 0, tonumber(most) - 1)
  end
  redis.call('PEXPIRE', key, keep_ms)
end
