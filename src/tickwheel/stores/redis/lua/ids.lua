-- ids.lua: the first ids after a cursor in each of some state sets, in id (byte) order.
-- KEYS[1..8] the shard's fixed keys (see lib.lua)
-- ARGV[1] cursor id, or '' from the start  ARGV[2] limit  ARGV[3..] state codes ('0'..'3')
-- returns: one list of at most ARGV[2] ids per state code given
-- read-only; the store merges the lists of every shard (Lua compares strings by locale)
local low = ARGV[1] == '' and '-' or '(' .. ARGV[1]
local out = {}
for i = 3, #ARGV do
  out[#out + 1] = redis.call('ZRANGEBYLEX', STATE_SET[ARGV[i]], low, '+', 'LIMIT', 0, ARGV[2])
end
return out
