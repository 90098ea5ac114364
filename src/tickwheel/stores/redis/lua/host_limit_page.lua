-- host_limit_page.lua: one page of host limits, by host, read through the index of hosts.
-- An index whose size differs from the hash's (a store written before the index existed, or
-- by an older version) is rebuilt first, once: O(hosts) then, O(log hosts + page) after.
-- KEYS[1] <p>:limits hash   KEYS[2] {<p>:limits}:hosts zset (score 0: hosts in byte order)
-- ARGV[1] the last host of the previous page, '' for the first   ARGV[2] how many at most
-- returns: {host1, record1, host2, record2, ...}
if redis.call('HLEN', KEYS[1]) ~= redis.call('ZCARD', KEYS[2]) then
  redis.call('DEL', KEYS[2])
  local hosts = redis.call('HKEYS', KEYS[1])
  for first = 1, #hosts, 1000 do
    local args = {}
    for n = first, math.min(first + 999, #hosts) do
      args[#args + 1] = 0
      args[#args + 1] = hosts[n]
    end
    redis.call('ZADD', KEYS[2], unpack(args))
  end
end
local from = ARGV[1] == '' and '-' or '(' .. ARGV[1]
local hosts = redis.call('ZRANGEBYLEX', KEYS[2], from, '+', 'LIMIT', 0, tonumber(ARGV[2]))
local reply = {}
if #hosts == 0 then
  return reply
end
local records = redis.call('HMGET', KEYS[1], unpack(hosts))
for n = 1, #hosts do
  if records[n] then
    reply[#reply + 1] = hosts[n]
    reply[#reply + 1] = records[n]
  end
end
return reply
