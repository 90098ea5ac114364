-- settings_field.lua: set or delete one part of a queue's settings (one field of the settings
-- hash), counting a change in the hash's version and keeping the index of the queues that
-- have settings in step, and refuse a new field past a cap.
-- KEYS[1] <p>:queue-settings  KEYS[2] its version, {<p>:queue-settings}:v
-- KEYS[3] {<p>:queue-settings}:names (score 0: the queues with settings, in name order)
-- ARGV[1] field (<part>:<queue>)  ARGV[2] value, '' to delete
-- ARGV[3] most fields the hash may hold, 0: any
-- returns: 1 if the field was there before, 0 if not, -1 if refused for the cap
local key, field, value = KEYS[1], ARGV[1], ARGV[2]
local queue = string.match(field, '^%a+:(.*)$')
local before = redis.call('HGET', key, field)
if value == '' then
  if before then
    redis.call('HDEL', key, field)
    redis.call('INCR', KEYS[2])
    local left = redis.call('HMGET', key, 'paused:' .. queue, 'limit:' .. queue, 'defaults:' .. queue)
    if not (left[1] or left[2] or left[3]) then
      redis.call('ZREM', KEYS[3], queue)
    end
    return 1
  end
  return 0
end
local cap = tonumber(ARGV[3])
if not before and cap > 0 and redis.call('HLEN', key) >= cap then
  return -1
end
if before ~= value then
  redis.call('HSET', key, field, value)
  redis.call('ZADD', KEYS[3], 0, queue)
  redis.call('INCR', KEYS[2])
end
if before then
  return 1
end
return 0
