-- claim.lua: lease the earliest timers of a queue due by a horizon.
-- KEYS[1..6] the shard's fixed keys (see lib.lua)  KEYS[7] the queue's bucket index
-- ARGV[1] queue  ARGV[2] horizon_ms  ARGV[3] now_ms  ARGV[4] lease_ms
-- ARGV[5..] one lease seq per timer to claim (their number is the limit): the store numbers
--           claims across shards, and expired leases return in (deadline, lease seq) order
-- returns: {id1, record1, id2, record2, ...} as leased: attempt + 1 (the lease token), seq =
--          its lease seq, first claimed = now unless set, in (due, seq) order
-- walks due pages in order, dropping each it empties; stops at the limit or the first
-- bucket with timers beyond the horizon. Reads and writes in bulk: one HMGET and one
-- ZREMRANGEBYRANK per slice of a bucket, one variadic write per key at the end.
local queue, horizon, now = ARGV[1], ARGV[2], ARGV[3]
local deadline = int(tonumber(now) + tonumber(ARGV[4]))
local limit = #ARGV - 4
local out, taken = {}, 0
local records, leases = {}, {}
while taken < limit do
  local first = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', horizon, 'LIMIT', 0, 1)
  if #first == 0 then
    break
  end
  local low = first[1]
  local bucket = bucket_key(queue, low)
  local asked = math.min(limit - taken, 4000)
  local members = redis.call('ZRANGEBYSCORE', bucket, '-inf', horizon, 'LIMIT', 0, asked)
  if #members == 0 then
    break
  end
  local slice = {}
  for i, member in ipairs(members) do
    slice[i] = string.sub(member, SEQ_DIGITS + 1)
  end
  local raws = redis.call('HMGET', RECORDS, unpack(slice))
  -- the members are the bucket's first by rank; a stale one (no scheduled record) goes too
  redis.call('ZREMRANGEBYRANK', bucket, 0, #members - 1)
  for i, id in ipairs(slice) do
    local r = raws[i] and parse(raws[i])
    if r and r.state == SCHEDULED then
      taken = taken + 1
      r.state = LEASED
      r.attempt = int(tonumber(r.attempt) + 1)
      r.updated, r.seq = now, ARGV[4 + taken]
      if r.first == '' then
        r.first = now
      end
      local raw = pack(r)
      out[#out + 1] = id
      out[#out + 1] = raw
      records[#records + 1] = id
      records[#records + 1] = raw
      leases[#leases + 1] = deadline
      leases[#leases + 1] = r.seq .. id
    end
  end
  if redis.call('EXISTS', bucket) == 0 then
    drop_bucket(queue, low)
  elseif #members < asked then
    break -- the rest of this bucket is beyond the horizon
  end
end
if taken > 0 then
  bulk('HSET', RECORDS, records)
  bulk('ZADD', LEASES, leases)
  bulk('ZADD', lease_key(queue), leases)
end
return out
