-- queue_set.lua: replace a queue's settings, every part at once (a change of one part alone is
-- settings_field.lua), and count the change in the hash's version, keeping the index of the
-- queues that have settings in step.
-- KEYS[1] <p>:queue-settings  KEYS[2] its version, {<p>:queue-settings}:v
-- KEYS[3] {<p>:queue-settings}:names (score 0: the queues with settings, in name order)
-- ARGV[1] queue  ARGV[2] '1' when paused, '' when not
-- ARGV[3] the limit as codec.encode_limit writes it, '' for none
-- ARGV[4] the defaults as queue_defaults.encode_defaults_text writes them, '' for none
-- returns: 1
local key, queue = KEYS[1], ARGV[1]
redis.call('HDEL', key, 'paused:' .. queue, 'limit:' .. queue, 'defaults:' .. queue)
if ARGV[2] ~= '' then
  redis.call('HSET', key, 'paused:' .. queue, '1')
end
if ARGV[3] ~= '' then
  redis.call('HSET', key, 'limit:' .. queue, ARGV[3])
end
if ARGV[4] ~= '' then
  redis.call('HSET', key, 'defaults:' .. queue, ARGV[4])
end
if ARGV[2] ~= '' or ARGV[3] ~= '' or ARGV[4] ~= '' then
  redis.call('ZADD', KEYS[3], 0, queue)
else
  redis.call('ZREM', KEYS[3], queue)
end
redis.call('INCR', KEYS[2])
return 1
