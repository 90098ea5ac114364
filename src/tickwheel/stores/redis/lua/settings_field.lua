-- settings_field.lua: set or delete one field of a settings hash, counting a change in the
-- hash's version, and refuse a new field past a cap.
-- KEYS[1] the hash (<p>:queue-settings or <p>:limits)  KEYS[2] its version ({<hash>}:v)
-- ARGV[1] field  ARGV[2] value, '' to delete  ARGV[3] most fields the hash may hold, 0: any
-- returns: 1 if the field was there before, 0 if not, -1 if refused for the cap
local key, field, value = KEYS[1], ARGV[1], ARGV[2]
local before = redis.call('HGET', key, field)
if value == '' then
  if before then
    redis.call('HDEL', key, field)
    redis.call('INCR', KEYS[2])
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
  redis.call('INCR', KEYS[2])
end
if before then
  return 1
end
return 0
