-- lease grants a lease on the bucket KEYS[1], with its leases at KEYS[2].
-- ARGV is the capacity, p, q and fill (as take_each's), then want, least
-- (quanta), ttl (microseconds), the lease's id, and the id of a lease of the
-- caller's to end first with its unspent quanta (as release does; "" for
-- none), which go back to the bucket before the grant. It grants min(want,
-- the bucket's tokens) if that is at least least and above 0, and nothing
-- otherwise (want 0 only reports). The reply is {now, granted, the tick and
-- quanta of the bucket after the grant, out, the microsecond the lease
-- expires at (0 if none was granted), and, when nothing was granted, the
-- microsecond the last lease held ends (0 if none)}. A call that grants
-- nothing, ends no lease and finds none expired writes nothing.

local want, least, ttl, id = ARGV[5] + 0, ARGV[6] + 0, ARGV[7] + 0, ARGV[8]
local at, tk, out, expired = current()
local ended = 0
if ARGV[9] ~= '' then out, tk, ended = finish(ARGV[9], ARGV[10] + 0, out, tk) end
local grant = 0
if want > 0 then
  grant = math.min(want, tk)
  if grant < least then grant = 0 end
end
local expiry = 0
if grant > 0 then
  tk = tk - grant
  out = out + grant
  expiry = now + ttl
  redis.call('ZADD', lkey, expiry, id .. ' ' .. string.format('%d', grant))
end
if grant > 0 or expired > 0 or ended == 1 then storeLeased(key, lkey, at, tk, out, cap, p, q) end
local lastEnd = 0
if grant == 0 and out > 0 then
  local top = redis.call('ZRANGE', lkey, -1, -1, 'WITHSCORES')
  if #top == 2 then lastEnd = top[2] + 0 end
end
return {now, grant, at, tk, out, expiry, lastEnd}
