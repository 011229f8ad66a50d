-- heartbeat records the instance ARGV[1] as alive in the sorted set
-- KEYS[1], scored by Redis TIME in microseconds, drops the instances not
-- seen for ARGV[2] microseconds, and returns how many are left. The set
-- expires with its last instance. It is a script of its own, without
-- lib.lua.

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local window = ARGV[2] + 0
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000) + 1000)
return {redis.call('ZCARD', KEYS[1])}
