-- schedule_count.lua: count the schedules of one shard.
-- KEYS[1..6] the shard's fixed keys (unused)  KEYS[7] schedules hash  KEYS[8] id index (unused)
-- returns: the number of schedules
return redis.call('HLEN', KEYS[7])
