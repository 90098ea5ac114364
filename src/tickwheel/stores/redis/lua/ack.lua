-- ack.lua: mark leased timers done and keep them until their retention ends.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV[1] now_ms  ARGV[2] expiry_ms (now + retention)  ARGV[3] "<id> <token> " per lease
-- ARGV[4] " <id> " per lease whose last ack went unanswered (it may have landed)
-- ARGV[5] expiry_ms of a schedule's occurrence (its id holds '@'), kept in the list
--         <tag>:xo as its retention may be shorter (purge.lua reads both lists)
-- ARGV[6] "<attempts kept per timer> <attempt retention ms>"
-- ARGV[7], ARGV[8], ... per lease, the attempt to record with its ack (JSON), or ''
-- returns: one entry per lease: 1 when acked, or for a lease in ARGV[4] when done already by
--          that token; 0 when the token no longer holds the lease (nothing changed for that
--          one; an id repeated in the call is acked once)
-- bounded by the number of leases, which the store caps per call; one HMGET, then one
-- variadic write per key; a lease batch only counts down (lib.lua). Each record is rewritten
-- by one match and one concatenation. With no retention the records are deleted at once.
local now = ARGV[1]
-- per kind, plain then occurrence: its expiry, whether it is kept, its list, the ids done
local kinds = {
  {expiry = ARGV[2], list = DONE_LIST, done = {}},
  {expiry = ARGV[5], list = TAG .. ':xo', done = {}},
}
for _, kind in ipairs(kinds) do
  kind.keep = tonumber(kind.expiry) > tonumber(now)
end
local most, keep_ms = string.match(ARGV[6], '^(%d+) (%d+)$')
local ids, tokens = {}, {}
for id, token in string.gmatch(ARGV[3], '(%S+) (%S+) ') do
  ids[#ids + 1] = id
  tokens[#tokens + 1] = token
end
local raws = records_of(ids)
local results, acked = {}, {}
local records, gone = {}, {}
for n, id in ipairs(ids) do
  local raw = raws[n] or ''
  local attempt, due_created, deadline, q, rest_at = string.match(raw,
    '^1,(%d+),(%w+,%w+),%d*,%w%w%w%w%w%w%w%w%w(%d+),([^,|]*),()')
  if acked[id] then
    results[n] = 0
  elseif attempt == nil or attempt ~= tokens[n] then
    results[n] = string.match(raw, '^2,(%d+),') == tokens[n] and
      string.find(ARGV[4], ' ' .. id .. ' ', 1, true) and 1 or 0
  else
    acked[id] = true
    results[n] = 1
    local queue = q ~= '' and q or DEFAULT_QUEUE
    local b = batch_of(queue, deadline)
    b.delta = b.delta - 1
    count(LEASED, queue, -1)
    local kind = kinds[string.find(id, '@', 1, true) and 2 or 1]
    if kind.keep then
      count(DONE, queue, 1)
      records[#records + 1] = id
      records[#records + 1] = '2,' .. attempt .. ',' .. due_created .. ',' .. now .. ',' ..
        kind.expiry .. ',' .. q .. ',' .. string.sub(raw, rest_at)
      kind.done[#kind.done + 1] = id
      record_attempt(id, ARGV[6 + n] or '', most, keep_ms)
    else
      gone[#gone + 1] = id
      redis.call('DEL', TAG .. ':a:' .. id) -- kept no longer than its timer
    end
  end
end
if #records > 0 then
  bulk('HSET', RECORDS, records)
end
for _, kind in ipairs(kinds) do
  if #kind.done > 0 then
    redis.call('RPUSH', kind.list, '@' .. kind.expiry)
    bulk('RPUSH', kind.list, kind.done)
  end
end
if #gone > 0 then
  bulk('HDEL', RECORDS, gone)
end
finish()
return results
