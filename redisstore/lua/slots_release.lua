-- slots_release gives back the in-flight slot of the holder ARGV[1] in the
-- sorted set KEYS[1] (see slots_acquire.lua), if it holds one. The reply
-- is {released (0 or 1)}. It is a script of its own, without lib.lua.

return {redis.call('ZREM', KEYS[1], ARGV[1])}
