"""The raw Redis floor's shared pieces: what plain redis-py commands cost on the same server.

Each store and engine figure is read against this floor, measured in the same run on the same
private server, so that the machine's speed cancels out of the ratio.
"""

RAW_DUE = "raw:due"  # the zset the floor's due timers wait in
# the floor's claim: one zset, due members moved to a lease zset, as the store's claim does
RAW_CLAIM_LUA = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids == 0 then
  return ids
end
redis.call('ZREM', KEYS[1], unpack(ids))
local members = {}
for i, id in ipairs(ids) do
  members[2 * i - 1] = ARGV[3]
  members[2 * i] = id
end
redis.call('ZADD', KEYS[2], unpack(members))
return ids
"""
