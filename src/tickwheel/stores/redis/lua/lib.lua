-- lib.lua: helpers every tickwheel script starts with (the store prepends this file to each).
-- Every script receives its shard's fixed keys as KEYS[1..6]:
--   KEYS[1] records hash (id → record)   KEYS[2] lease zset (<lease seq><id> → deadline ms)
--   KEYS[3] done-expiry zset (id → ms)   KEYS[4] id index: the low ids of its pages (score 0)
--   KEYS[5] dead letters (id, score 0)   KEYS[6] set of queues with scheduled timers
-- Bucket, queue-index, queue-lease and id-page keys depend on data read inside the script (a
-- record's queue and due time, an id's place in the index), so they are built here from the
-- hash tag of KEYS[1]: every key a script touches shares a slot.
-- Numbers stay decimal strings; arithmetic results are formatted with '%d' (never %.14g).

local RECORDS, LEASES, EXPIRY, IDS, DEAD_SET, QUEUES = KEYS[1], KEYS[2], KEYS[3], KEYS[4],
  KEYS[5], KEYS[6]
local SCHEDULED, LEASED, DONE, DEAD = '0', '1', '2', '3'
local TAG = string.match(RECORDS, '^{[^}]*}')
-- the store's wake channel, <prefix>:wake (a channel is no key: it has no slot)
local WAKE = string.match(TAG, '^{(.*):%d+}$') .. ':wake'
local SEQ_DIGITS = 9 -- base 62 (record.py)
-- ids per id page: zset-max-listpack-entries' default, so a page stays a compact listpack
local ID_PAGE = 128
-- timers per due page, for the same reason (more only when they all share one due ms)
local DUE_PAGE = 128
local DEFAULT_QUEUE = 'default' -- stored as an empty field

local function int(n)
  return string.format('%d', n)
end

-- `command key args...` over a long list, in slices unpack() can take (Lua's C stack holds
-- ~8,000 values); slices are even, so field/value and score/member pairs stay whole
local function bulk(command, key, args)
  for i = 1, #args, 4000 do
    redis.call(command, key, unpack(args, i, math.min(i + 3999, #args)))
  end
end

local function index_key(queue)
  return TAG .. ':q:' .. queue .. ':i'
end

-- a due page of a queue: its scheduled timers due from <low> ms up to the next page's low
local function bucket_key(queue, low)
  return TAG .. ':q:' .. queue .. ':b:' .. low
end

-- the leases of one queue (<lease seq><id> → deadline), as in LEASES: for next_due.lua
local function lease_key(queue)
  return TAG .. ':q:' .. queue .. ':l'
end

-- record: "<state>,<attempt>,<due>,<created>,<updated>,<seq>,<queue>,<first claimed>,<errlen>|
--          <error><spec>" (record.py): created is base 36 and passes through untouched;
-- updated is empty until a change, the queue empty for 'default', first claimed and errlen
-- empty when unset
local function parse(raw)
  local state, attempt, due, created, updated, seq, queue, first, errlen, body = string.match(raw,
    '^(%d),(%d+),(%-?%d+),(%-?%w+),(%d*),(%w+),([^,|]*),(%d*),(%d*)|()')
  if not state then
    error('tickwheel: corrupt record ' .. string.sub(raw, 1, 60))
  end
  if queue == '' then
    queue = DEFAULT_QUEUE
  end
  return { state = state, attempt = attempt, due = due, created = created, updated = updated,
           seq = seq, queue = queue, first = first, errlen = errlen, body = string.sub(raw, body) }
end

local function pack(r)
  local queue = r.queue
  if queue == DEFAULT_QUEUE then
    queue = ''
  end
  return table.concat({ r.state, r.attempt, r.due, r.created, r.updated, r.seq, queue,
                        r.first, r.errlen }, ',') .. '|' .. r.body
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

-- only dead letters keep a set of their own (list(DEAD) reads it); the other states are
-- counted from the lease and expiry sets (stats.lua) and listed by filtering the id index
local function move_state(id, r, state)
  if r.state == DEAD and state ~= DEAD then
    redis.call('ZREM', DEAD_SET, id)
  elseif state == DEAD and r.state ~= DEAD then
    redis.call('ZADD', DEAD_SET, 0, id)
  end
  r.state = state
end

-- The id index: every timer's id, in id order, in pages of at most ID_PAGE ids (zsets, score
-- 0). KEYS[4] holds each page's low bound; page <low> holds the ids from <low> up to the next
-- low bound, so an id's page is the greatest low bound <= the id; the first page's bound is
-- '' (below every id). One zset per shard would be a skiplist costing ~118 B per id; a page
-- stays a listpack (~30 B per id).
local function page_key(low)
  return IDS .. ':' .. low
end

-- the low bound of the page that holds (or would hold) id; nil when there is no page below it
local function id_page(id)
  return redis.call('ZREVRANGEBYLEX', IDS, '[' .. id, '-', 'LIMIT', 0, 1)[1]
end

-- add a new id to the index; sizes caches page sizes within one script call
local function index_id(id, sizes)
  local low = id_page(id)
  if low == nil then
    low = ''
    redis.call('ZADD', IDS, 0, low)
  end
  local size = sizes[low] or redis.call('ZCARD', page_key(low))
  if size >= ID_PAGE then
    -- split the full page: at the new id when it falls in the upper half (ids that mostly
    -- grow, like generated ones, then leave full pages behind; past the last id nothing
    -- moves), else at the middle. Redis, not Lua, compares ids (Lua's < follows the locale),
    -- so the id's page is looked up again.
    local page = page_key(low)
    local split = id
    if redis.call('ZLEXCOUNT', page, '-', '(' .. id) < ID_PAGE / 2 then
      split = redis.call('ZRANGE', page, ID_PAGE / 2, ID_PAGE / 2)[1]
    end
    local upper = redis.call('ZRANGEBYLEX', page, '[' .. split, '+')
    if #upper > 0 then
      redis.call('ZREMRANGEBYLEX', page, '[' .. split, '+')
      local members = {}
      for i, member in ipairs(upper) do
        members[2 * i - 1] = 0
        members[2 * i] = member
      end
      redis.call('ZADD', page_key(split), unpack(members))
    end
    redis.call('ZADD', IDS, 0, split)
    sizes[low], sizes[split] = size - #upper, #upper
    low = id_page(id)
    size = sizes[low]
  end
  redis.call('ZADD', page_key(low), 0, id)
  sizes[low] = size + 1
end

local function unindex_id(id)
  local low = id_page(id)
  if low ~= nil then
    local page = page_key(low)
    if redis.call('ZREM', page, id) == 1 and redis.call('EXISTS', page) == 0 then
      redis.call('ZREM', IDS, low)
    end
  end
end

-- the earliest due time of a queue's scheduled timers in this shard, or nil
local function earliest(queue)
  local low = redis.call('ZRANGE', index_key(queue), 0, 0)[1]
  if low == nil then
    return nil
  end
  return tonumber(redis.call('ZRANGE', bucket_key(queue, low), 0, 0, 'WITHSCORES')[2])
end

-- before timers due at `due` join a queue: tell its waiters (Store.wait) when they become its
-- earliest here, so its next due time may be earlier
local function wake(queue, due)
  local first = earliest(queue)
  if first == nil or tonumber(due) < first then
    redis.call('PUBLISH', WAKE, queue)
  end
end

-- Due pages: a queue's scheduled timers in this shard, as <seq><id> → due ms, in pages of at
-- most DUE_PAGE. The queue's index (score and member: the page's low bound, ms) lists its
-- pages; a timer is in the page with the greatest low bound <= its due time, and the timers of
-- one due ms share a page. Fixed minute buckets held ~1,000 timers each at 1M pending over an
-- hour (skiplists, ~145 B per timer) or one (a key per timer) when sparse; pages stay
-- listpacks (~50 B per timer) at any density (decisions 22).

-- the low bound of the page that holds (or would hold) a timer due at `due`, or nil
local function due_page(queue, due)
  return redis.call('ZREVRANGEBYSCORE', index_key(queue), due, '-inf', 'LIMIT', 0, 1)[1]
end

-- the low bound of the page a new timer due at `due` goes into, after making room there;
-- sizes caches page sizes by page key within one script call
local function page_for(queue, due, sizes)
  local index = index_key(queue)
  local low = due_page(queue, due)
  if low == nil then
    -- before every page: the first page takes it, renamed to the new bound, if it has room
    local first = redis.call('ZRANGE', index, 0, 0)[1]
    local size = 0
    low = int(tonumber(due))
    if first ~= nil then
      size = redis.call('ZCARD', bucket_key(queue, first))
      if size < DUE_PAGE then
        redis.call('RENAME', bucket_key(queue, first), bucket_key(queue, low))
        redis.call('ZREM', index, first)
        sizes[bucket_key(queue, first)] = nil
      else
        size = 0
      end
    end
    redis.call('ZADD', index, low, low)
    sizes[bucket_key(queue, low)] = size
    return low
  end
  local page = bucket_key(queue, low)
  local size = sizes[page] or DUE_PAGE
  if size >= DUE_PAGE then
    size = redis.call('ZCARD', page) -- the cache may be stale (a replaced timer left)
    sizes[page] = size
    if size < DUE_PAGE then
      return low
    end
  else
    return low
  end
  -- split the full page: at the new due time when it falls in the upper half (due times that
  -- mostly grow, like now + a delay, then leave full pages behind; past the last one nothing
  -- moves), else at the middle's due time, or the first after the low bound
  local split = int(tonumber(due))
  if redis.call('ZCOUNT', page, '-inf', '(' .. due) < DUE_PAGE / 2 then
    split = tonumber(redis.call('ZRANGE', page, DUE_PAGE / 2, DUE_PAGE / 2, 'WITHSCORES')[2])
    if split == tonumber(low) then
      split = redis.call('ZRANGEBYSCORE', page, '(' .. low, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]
      if split == nil then
        return low -- every timer here is due at one ms: the page grows past DUE_PAGE
      end
    end
    split = int(tonumber(split))
  end
  -- the timers due from `split` on move to a new page
  local moved = redis.call('ZRANGEBYSCORE', page, split, '+inf', 'WITHSCORES')
  if #moved > 0 then
    redis.call('ZREMRANGEBYSCORE', page, split, '+inf')
    local entries = {}
    for i = 1, #moved, 2 do
      entries[i], entries[i + 1] = moved[i + 1], moved[i]
    end
    redis.call('ZADD', bucket_key(queue, split), unpack(entries))
  end
  sizes[page], sizes[bucket_key(queue, split)] = size - #moved / 2, #moved / 2
  redis.call('ZADD', index, split, split)
  if tonumber(due) >= tonumber(split) then
    return split
  end
  return low
end

-- put a new scheduled timer in its queue's due pages
local function insert(queue, due, member, sizes)
  local page = bucket_key(queue, page_for(queue, due, sizes))
  redis.call('ZADD', page, due, member)
  sizes[page] = sizes[page] + 1
end

-- put a scheduled timer in its due page, and its queue in the queues set
local function enqueue(id, r)
  wake(r.queue, r.due)
  insert(r.queue, r.due, r.seq .. id, {})
  redis.call('SADD', QUEUES, r.queue)
end

-- the page emptied: the index lists only non-empty pages, the queues set only used queues
local function drop_bucket(queue, low)
  local index = index_key(queue)
  redis.call('ZREM', index, low)
  if redis.call('EXISTS', index) == 0 then
    redis.call('SREM', QUEUES, queue)
  end
end

local function dequeue(id, r)
  local low = due_page(r.queue, r.due)
  if low == nil then
    return
  end
  local bucket = bucket_key(r.queue, low)
  redis.call('ZREM', bucket, r.seq .. id)
  if redis.call('EXISTS', bucket) == 0 then
    drop_bucket(r.queue, low)
  end
end

-- hold a leased timer until deadline_ms, under its lease seq
local function lease(id, r, deadline_ms)
  redis.call('ZADD', LEASES, deadline_ms, r.seq .. id)
  redis.call('ZADD', lease_key(r.queue), deadline_ms, r.seq .. id)
end

local function unlease(id, r)
  redis.call('ZREM', LEASES, r.seq .. id)
  redis.call('ZREM', lease_key(r.queue), r.seq .. id)
end

-- remove every trace of a timer, whatever its state
local function forget(id, r)
  if r.state == SCHEDULED then
    dequeue(id, r)
  end
  if r.state == LEASED then
    unlease(id, r)
  end
  if r.state == DEAD then
    redis.call('ZREM', DEAD_SET, id)
  end
  redis.call('ZREM', EXPIRY, id)
  unindex_id(id)
  redis.call('HDEL', RECORDS, id)
end

-- a done timer past its retention is gone for readers even before expire.lua deletes it
local function expired(id, r, now_ms)
  if r.state ~= DONE then
    return false
  end
  local at = redis.call('ZSCORE', EXPIRY, id)
  return at ~= false and tonumber(at) <= tonumber(now_ms)
end

-- the leased record when (id, token) still holds the lease, its lease entries removed; else nil
local function settle(id, token)
  local r = load(id)
  if r == nil or r.state ~= LEASED or r.attempt ~= token then
    return nil
  end
  unlease(id, r)
  return r
end

