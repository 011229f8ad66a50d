-- take_each makes KEYS' takes one by one, each on its own, at one reading
-- of Redis TIME: the common call (one key), and a batch of concurrent checks
-- of one Limiter. ARGV is the capacity, p, q and fill of the Limiter, in the
-- units of lib.lua, then one cost per key: 0 peeks, and a cost above the
-- capacity takes nothing and denies (the caller reads it as a request for a
-- report). The reply is {now, then three integers per key: denied (0 or 1),
-- the tick the bucket's state is taken at, and the quanta it holds (after the
-- take, if it was made)}; now is Redis TIME in microseconds. The caller
-- derives RetryAfter and ResetAfter from that state (see units.wait), in
-- exact integer arithmetic that Lua's float64 numbers would need more server
-- time for than the rest of a take. A key listed twice sees its first take,
-- as consecutive calls do.

local cap, p, q, fill = ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local out = {now}
for i = 1, #KEYS do
  local key, cost = KEYS[i], ARGV[4 + i] + 0
  local last, tokens = load(key)
  local at, tk = advance(last, tokens, now, cap, p, q, fill)
  local denied = 0
  if cost > 0 then
    if tk < cost then
      denied = 1
    else
      tk = tk - cost
      store(key, at, tk, cap, now, p, q)
    end
  end
  out[3*i-1], out[3*i], out[3*i+1] = denied, at, tk
end
return out
