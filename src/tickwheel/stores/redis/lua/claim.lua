-- claim.lua: lease the earliest timers due by a horizon, of each of some queues.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)
-- ARGV per queue six: queue, horizon_ms, now_ms, lease_ms,
--   one lease seq (9 base-62 digits) per timer to claim, concatenated (their number is the
--   limit): the store numbers claims across shards, and expired leases return in
--   (deadline, lease seq) order,
--   the claim's request id: the leases it takes are remembered under <tag>:c:<rid>
--   ("<id> <id> ...\n<token> <token> ...", each list one table.concat) until they lapse,
--   written with them, so a claim sent again after its reply was lost (a dropped connection,
--   a restart) returns them instead of leaving them leased to nobody
-- returns: per queue {id1, record1, id2, record2, ...} as leased: attempt + 1 (the lease
--          token), seq = its lease seq and deadline, first claimed = now unless set, in
--          (due, seq) order; for a request id already seen, the leases it took that still
--          hold (a timer settled or reclaimed since is left out), and nothing new
-- moves the slots the horizon reaches into the near set first (lib.lua ready(), bounded),
-- then takes the near set's first timers; the leases join the batch of their deadline. Each
-- record is rewritten by one match and one concatenation (parse() and pack() cost twice that).
-- Each queue's head here is set from what it holds after the claim (lib.lua set_head()).
-- the next attempt of the common first ones, as text: Lua formats a number with sprintf
-- ('%.14g'), which costs more than the rest of a record's rewrite
local NEXT_ATTEMPT = { ['0'] = '1', ['1'] = '2', ['2'] = '3', ['3'] = '4', ['4'] = '5',
  ['5'] = '6', ['6'] = '7', ['7'] = '8', ['8'] = '9', ['9'] = '10' }

local function claimed_before(memo)
  local held = redis.call('GET', memo)
  if not held then
    return nil
  end
  local ids, tokens = {}, {}
  local newline = string.find(held, '\n', 1, true)
  for id in string.gmatch(string.sub(held, 1, newline - 1), '%S+') do
    ids[#ids + 1] = id
  end
  for token in string.gmatch(string.sub(held, newline + 1), '%S+') do
    tokens[#tokens + 1] = token
  end
  local raws = records_of(ids)
  local out = {}
  for i, id in ipairs(ids) do
    local raw = raws[i]
    if raw and string.match(raw, '^1,(%d+),') == tokens[i] then
      out[#out + 1] = id
      out[#out + 1] = raw
    end
  end
  return out
end

local function claim(queue, horizon_ms, now, lease_ms, seqs, rid)
  local memo = TAG .. ':c:' .. rid
  local again = claimed_before(memo)
  if again then
    return again
  end
  local horizon = ready(queue, horizon_ms, now)
  local deadline = int(tonumber(now) + tonumber(lease_ms))
  local near = near_key(queue)
  local members = redis.call('ZRANGEBYSCORE', near, '-inf', horizon, 'LIMIT', 0,
    #seqs / SEQ_DIGITS)
  if #members == 0 then
    set_head(queue)
    return {}
  end
  redis.call('ZREMRANGEBYRANK', near, 0, #members - 1)
  local ids = {}
  for i, member in ipairs(members) do -- <length><due><seq><id>
    ids[i] = string.sub(member, tonumber(string.sub(member, 1, 1), 36) + SEQ_DIGITS + 2)
  end
  local raws = records_of(ids)
  local out, taken, entries, leased = {}, 0, {}, {}
  local b = batch_of(queue, deadline)
  for i, id in ipairs(ids) do
    local raw = raws[i]
    local attempt, due_created, seq, q, first, tail_at = string.match(raw or '',
      '^0,(%d+),(%w+,%w+),%d*,(%w+),([^,|]*),(%d*),()')
    local at = #members[i] - #id - SEQ_DIGITS + 1
    if attempt and string.find(members[i], seq, at, true) == at then
      taken = taken + 1
      local lease_seq = string.sub(seqs, (taken - 1) * SEQ_DIGITS + 1, taken * SEQ_DIGITS)
      if first == '' then
        first = now
      end
      local token = NEXT_ATTEMPT[attempt] or int(attempt + 1)
      out[#out + 1] = id
      out[#out + 1] = '1,' .. token .. ',' .. due_created ..
        ',' .. now .. ',' .. lease_seq .. deadline .. ',' .. q .. ',' .. first .. ',' ..
        string.sub(raw, tail_at)
      entries[taken] = id
      leased[taken] = token
      b.entries[#b.entries + 1] = id
    end
  end
  if taken > 0 then
    bulk('HSET', RECORDS, out)
    redis.call('SET', memo, table.concat(entries, ' ') .. '\n' .. table.concat(leased, ' '),
      'PX', lease_ms)
    b.delta = b.delta + taken
    count(SCHEDULED, queue, -taken)
    count(LEASED, queue, taken)
    finish()
  end
  unlist_queue(queue)
  set_head(queue)
  return out
end

local replies = {}
for i = 1, #ARGV, 6 do
  replies[#replies + 1] = claim(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4],
    ARGV[i + 5])
end
return replies
