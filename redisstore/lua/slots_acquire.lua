-- slots_acquire takes one of the in-flight slots of the sorted set KEYS[1]
-- for the holder ARGV[1], if fewer than ARGV[2] are held, for ARGV[3]
-- milliseconds. A member's score is when its slot expires, in milliseconds
-- of Redis TIME; a slot is held while TIME is before it, and the expired
-- are removed first. A holder that holds is renewed and admitted without
-- a second slot. The set expires with its last slot, so that an idle key
-- vanishes. The reply is {admitted (0 or 1), slots held after}. It is a
-- script of its own, without lib.lua.

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local key, holder, max, ttl = KEYS[1], ARGV[1], ARGV[2] + 0, ARGV[3] + 0
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local held = redis.call('ZCARD', key)
local mine = redis.call('ZSCORE', key, holder)
if not mine then
	if held >= max then return {0, held} end
	held = held + 1
end
-- now + ttl is the latest expiry in the set: the key lives as long.
redis.call('ZADD', key, now + ttl, holder)
redis.call('PEXPIRE', key, ttl)
return {1, held}
