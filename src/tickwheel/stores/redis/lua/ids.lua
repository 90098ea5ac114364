-- ids.lua: the first ids after a cursor, in id (byte) order: of every timer, or of one state.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] cursor id, or '' from the start  ARGV[2] limit  ARGV[3] state code ('0'..'3'), or
-- '' for every state  ARGV[4] budget: ids read per call when filtering by state
-- returns: {ids, resume}: at most ARGV[2] ids; resume is '' when they are every match after the
--          cursor up to the limit, else the last id read (the budget ran out: call again from it);
--          for leased timers, when at most ARGV[4], all their ids in any order instead
-- read-only. Dead letters have a set of their own, leased timers the lease zset; other states
-- filter the id index by the records' state, reading at most about ARGV[4] ids (whole pages)
-- per call: listing a rare state among many timers takes many calls. The store merges the lists of every shard (Lua
-- compares strings by locale, Redis by bytes).
local cursor, limit, state, budget = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local from = cursor == '' and '-' or '(' .. cursor
if state == DEAD then
  return { redis.call('ZRANGEBYLEX', DEAD_SET, from, '+', 'LIMIT', 0, limit), '' }
end
if state == LEASED and redis.call('ZCARD', LEASES) <= budget then
  -- few leases (the usual case): every leased id, in no order; the store sorts them and drops
  -- those up to the cursor
  local out = {}
  for i, member in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do
    out[i] = string.sub(member, SEQ_DIGITS + 1)
  end
  return { out, '' }
end
local out, read = {}, 0
local low = cursor ~= '' and id_page(cursor) or nil
local pages = redis.call('ZRANGEBYLEX', IDS, low and '[' .. low or '-', '+', 'LIMIT', 0, 8)
while #pages > 0 do
  for _, page in ipairs(pages) do
    if state == '' then
      local ids = redis.call('ZRANGEBYLEX', page_key(page), from, '+', 'LIMIT', 0, limit - #out)
      for _, id in ipairs(ids) do
        out[#out + 1] = id
      end
    else
      local ids = redis.call('ZRANGEBYLEX', page_key(page), from, '+')
      if #ids > 0 then
        local raws = redis.call('HMGET', RECORDS, unpack(ids))
        for i, id in ipairs(ids) do
          if raws[i] and string.sub(raws[i], 1, 1) == state then
            out[#out + 1] = id
            if #out == limit then
              return { out, '' }
            end
          end
        end
        read = read + #ids
        if read >= budget then
          return { out, ids[#ids] }
        end
      end
    end
    if #out >= limit then
      return { out, '' }
    end
  end
  pages = redis.call('ZRANGEBYLEX', IDS, '(' .. pages[#pages], '+', 'LIMIT', 0, 8)
end
return { out, '' }
