-- refund gives back a take made by a take script: KEYS[1], ARGV capacity,
-- p, q, fill, cost and the tick the take stored. It returns the cost less the
-- refill the bucket received since the take (the give-back of
-- engine.Engine.TakeAllAt), at most up to the capacity, so that the bucket
-- never holds more than it would had the take never been made. For a
-- calendar quota (p = 0, see quota_lib.lua) the tick is the end of the
-- period the take was made in: the cost goes back to that period if it is
-- still the key's, and a period that ended owes nothing. For a strict
-- window (p = -1, see window_lib.lua) the tick is the slot the take was
-- counted in: the cost goes back to that slot if it is still in the key's
-- window, as engine.Window gives a take back. The reply is {now}.

local cap, p, q, fill, cost, took = ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0
local key = KEYS[1]
if p == -1 then
  local newest, c = wload(key, fill)
  if newest ~= nil and took >= newest - fill and took <= newest then
    local j = took - (newest - fill) + 1
    c[j] = c[j] - math.min(c[j], cost)
    wkeep(key, newest, c, q, fill)
  end
  return {now}
end
local last, tokens = load(key)
if p == 0 then
  if last == took and tokens >= cost and last * 1000 > now then keep(key, last, tokens - cost) end
  return {now}
end
if last ~= nil then
  local at, tk = advance(last, tokens, now, cap, p, q, fill)
  local back = cost
  if at > took then
    local el = at - took
    if el > fill then el = fill end
    local c = credit(took, el, p, q)
    if c >= back then back = 0 else back = back - c end
  end
  if back > 0 and tk < cap then
    store(key, at, math.min(tk + back, cap), cap, now, p, q)
  end
end
return {now}
