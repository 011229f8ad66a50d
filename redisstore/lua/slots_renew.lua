-- slots_renew keeps the in-flight slot of the holder ARGV[i+1] in the
-- sorted set KEYS[i] (see slots_acquire.lua) held for ARGV[1] more
-- milliseconds of Redis TIME, for each i, if it is still held: a slot
-- that expired or was released is not taken again. The reply is {slots
-- renewed}. It is a script of its own, without lib.lua.

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local ttl = ARGV[1] + 0
local n = 0
for i, key in ipairs(KEYS) do
	local exp = redis.call('ZSCORE', key, ARGV[i + 1])
	if exp and exp + 0 > now then
		redis.call('ZADD', key, 'XX', now + ttl, ARGV[i + 1])
		redis.call('PEXPIRE', key, ttl)
		n = n + 1
	end
end
return {n}
