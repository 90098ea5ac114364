-- queue_set.lua: replace a queue's settings, every part at once (a change of one part alone is
-- settings_field.lua), and count the change in the hash's version.
-- KEYS[1] <p>:queue-settings  KEYS[2] its version, {<p>:queue-settings}:v
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
redis.call('INCR', KEYS[2])
return 1
