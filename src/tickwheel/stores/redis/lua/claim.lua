-- claim.lua: lease the earliest timers of a queue due by a horizon.
-- KEYS[1..8] the shard's fixed keys (see lib.lua)  KEYS[9] the queue's bucket index
-- ARGV[1] queue  ARGV[2] horizon_ms  ARGV[3] now_ms  ARGV[4] lease_ms
-- ARGV[5..] one lease seq per timer to claim (their number is the limit): the store numbers
--           claims across shards, and expired leases return in (deadline, lease seq) order
-- returns: {id1, record1, id2, record2, ...} as leased: attempt + 1 (the lease token), seq =
--          its lease seq, first claimed = now unless set, in (due, seq) order
-- walks buckets in minute order, dropping each it empties; stops at the limit or the first
-- bucket with timers beyond the horizon, so it visits at most limit + 1 buckets
local queue, horizon, now = ARGV[1], ARGV[2], ARGV[3]
local deadline = int(tonumber(now) + tonumber(ARGV[4]))
local limit = #ARGV - 4
local last_minute = minute_of(horizon)
local out, taken = {}, 0
while taken < limit do
  local first = redis.call('ZRANGEBYSCORE', KEYS[9], '-inf', last_minute, 'LIMIT', 0, 1)
  if #first == 0 then
    break
  end
  local minute = first[1]
  local bucket = bucket_key(queue, minute)
  local members = redis.call('ZRANGEBYSCORE', bucket, '-inf', horizon, 'LIMIT', 0, limit - taken)
  for _, member in ipairs(members) do
    redis.call('ZREM', bucket, member)
    local id = string.sub(member, SEQ_DIGITS + 1)
    local r = load(id)
    if r ~= nil and r.state == SCHEDULED then
      taken = taken + 1
      move_state(id, r, LEASED)
      r.attempt = int(tonumber(r.attempt) + 1)
      r.updated, r.seq = now, ARGV[4 + taken]
      if r.first == '' then
        r.first = now
      end
      out[#out + 1] = id
      out[#out + 1] = save(id, r)
      lease(id, r, deadline)
    end
  end
  if redis.call('EXISTS', bucket) == 1 then
    break
  end
  drop_bucket(queue, minute)
end
return out
