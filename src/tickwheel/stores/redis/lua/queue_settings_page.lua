-- queue_settings_page.lua: one page of the queues that have settings, by name, read through
-- their index, with each one's three fields.
-- The index is built from the hash first when it was never built (a store written before it
-- existed): O(fields) then, once; O(log queues + page) after.
-- KEYS[1] <p>:queue-settings  KEYS[2] {<p>:queue-settings}:names (score 0)
-- KEYS[3] {<p>:queue-settings}:built, set once the index is built
-- ARGV[1] the last queue of the previous page, '' for the first   ARGV[2] how many at most
-- returns: {queue1, paused or false, limit or false, defaults or false, queue2, ...}
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[2])
  local fields = redis.call('HKEYS', KEYS[1])
  for n = 1, #fields do
    redis.call('ZADD', KEYS[2], 0, string.match(fields[n], '^%a+:(.*)$'))
  end
  redis.call('SET', KEYS[3], '1')
end
local from = ARGV[1] == '' and '-' or '(' .. ARGV[1]
local queues = redis.call('ZRANGEBYLEX', KEYS[2], from, '+', 'LIMIT', 0, tonumber(ARGV[2]))
local reply = {}
for _, queue in ipairs(queues) do
  local parts = redis.call('HMGET', KEYS[1], 'paused:' .. queue, 'limit:' .. queue, 'defaults:' .. queue)
  reply[#reply + 1] = queue
  reply[#reply + 1] = parts[1] or false
  reply[#reply + 1] = parts[2] or false
  reply[#reply + 1] = parts[3] or false
end
return reply
