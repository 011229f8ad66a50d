package redisstore

// The scripts keep one hash per bucket with two integer fields: "a", the
// microsecond (Redis TIME, since the Unix epoch) the bucket was last updated
// at, and "t", the quanta (thousandths of a token) it held then. A missing
// key is a full bucket. All arithmetic is on Lua numbers (float64) holding
// integers below 2^53; Config.units picks the rate fraction p/q so that every
// intermediate value stays below that bound (see doc.go, "Units").
//
// The helpers mirror package fixedpoint with one microsecond as the tick:
// the refill grid G(t) = floor(t*p/q) quanta at microsecond t, its phase
// (t*p mod q), Credit, Boundary and the wait until a count is reached.
// Products that could pass 2^53 go through muldiv, which never forms them.
const luaLib = `
local TWO53 = 9007199254740992
local function divmod(x, d)
  local c = math.floor(x / d)
  local r = x - c * d
  if r < 0 then c = c - 1; r = r + d elseif r >= d then c = c + 1; r = r - d end
  return c, r
end
-- muldiv returns floor(a*b/d) and a*b mod d for a, b < 2^53 and d < 2^52
-- whose quotient is below 2^53. When a*b itself is below 2^53 (the usual
-- case) that is one division; otherwise it doubles along b's bits, keeping
-- quotient and remainder apart so that nothing reaches 2^53.
local function muldiv(a, b, d)
  if a * b < TWO53 then return divmod(a * b, d) end
  -- Loop over the smaller factor's bits. (A temporary rather than
  -- "a, b = b, a": some Lua implementations, miniredis's among them,
  -- assign the second from the first's new value.)
  if a < b then local t = a; a = b; b = t end
  local aq, ar = divmod(a, d)
  local h = 1
  while h + h <= b do h = h + h end
  local q, r = 0, 0
  while h >= 1 do
    q = q + q; r = r + r
    if r >= d then q = q + 1; r = r - d end
    if b >= h then
      b = b - h
      q = q + aq; r = r + ar
      if r >= d then q = q + 1; r = r - d end
    end
    h = h / 2
  end
  return q, r
end
-- phase is t*p mod q: the grid's progress past its last whole quantum.
local function phase(t, p, q)
  local _, r = muldiv(math.fmod(t, q), p, q)
  return r
end
-- credit is G(from+elapsed) - G(from).
local function credit(from, elapsed, p, q)
  local c, r = muldiv(elapsed, p, q)
  if r + phase(from, p, q) >= q then c = c + 1 end
  return c
end
local function ceildiv(x, d)
  local c, r = divmod(x, d)
  if r > 0 then c = c + 1 end
  return c
end
-- boundary is the first tick from t at which the grid is on a whole quantum.
local function boundary(t, p, q)
  local ph = phase(t, p, q)
  if ph == 0 then return t end
  return t + ceildiv(q - ph, p)
end
-- advance returns the bucket's tick and tokens at now (fixedpoint.Advance).
local function advance(last, tokens, now, cap, p, q, fill)
  if last == nil then
    local b = boundary(now, p, q)
    return b, cap
  end
  local at = last
  if now > at then at = now end
  if at > last and tokens < cap then
    local el = at - last
    if el > fill then el = fill end
    tokens = tokens + credit(last, el, p, q)
    if tokens > cap then tokens = cap end
  end
  if tokens == cap then
    if now < last then at = last else at = boundary(now, p, q) end
  end
  return at, tokens
end
-- wait returns the time from now until a bucket holding have quanta at tick
-- at holds need, as whole microseconds and extra nanoseconds (0..1000): the
-- first instant at which the grid has refilled (need-have)*q - phase(at)
-- more, in units of 1/q quanta, at p units per microsecond.
local function wait(at, have, need, now, p, q)
  if have >= need then return 0, 0 end
  local k, rem = muldiv(need - have, q, p)
  local a, b = divmod(phase(at, p, q), p)
  k = k - a; rem = rem - b
  if rem < 0 then k = k - 1; rem = rem + p end
  local ns, nr = muldiv(rem, 1000, p)
  if nr > 0 then ns = ns + 1 end
  return at - now + k, ns
end
local function load(key)
  local v = redis.call('HMGET', key, 'a', 't')
  if v[1] then return tonumber(v[1]), tonumber(v[2]) end
  return nil, nil
end
local function store(key, at, tokens, cap, now, p, q)
  if tokens >= cap then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'a', at, 't', tokens)
  local us, ns = wait(at, tokens, cap, now, p, q)
  if ns > 0 then us = us + 1 end
  redis.call('PEXPIRE', key, ceildiv(us, 1000) + 1)
end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
`

// takeScript takes ARGV costs from KEYS, all or none, at Redis TIME.
//
// ARGV holds five integers per key: capacity, p, q, fill and cost, all in the
// units above (cost 0 peeks; a cost c above the capacity takes nothing and
// denies, reporting the wait for c-capacity-1). The reply is {seconds, microseconds, denied,
// then seven integers per key: allowed, remaining quanta, RetryAfter as
// whole microseconds and extra nanoseconds, ResetAfter likewise, and the tick
// the bucket's state is taken at (for a refund)}. denied is 0 when
// every take was made, else the 1-based index of the first denied take; then
// nothing was written and each key reports its bucket as it is, with the wait
// until its take alone would pass.
//
// Takes run in order against the state the earlier takes left, so a key
// listed twice pays twice, as it does in engine.AllowAll.
const takeScript = luaLib + `
local n = #KEYS
local cur = {}
local out = {tonumber(tm[1]), tonumber(tm[2]), 0}
local writes = {}
for i = 1, n do
  local j = (i - 1) * 5
  local cap, p, q, fill, cost = tonumber(ARGV[j+1]), tonumber(ARGV[j+2]), tonumber(ARGV[j+3]), tonumber(ARGV[j+4]), tonumber(ARGV[j+5])
  local key = KEYS[i]
  local s = cur[key]
  local last, tokens
  if s then last, tokens = s[1], s[2] else last, tokens = load(key) end
  local at, tk = advance(last, tokens, now, cap, p, q, fill)
  local o = 3 + (i - 1) * 7
  if cost > 0 and tk >= cost then
    tk = tk - cost
    cur[key] = {at, tk}
    writes[key] = {at, tk, cap, p, q}
    out[o+1] = 1
  elseif cost == 0 then
    out[o+1] = 1
  else
    out[3] = i
    break
  end
  out[o+2] = tk
  out[o+3], out[o+4] = 0, 0
  out[o+5], out[o+6] = wait(at, tk, cap, now, p, q)
  out[o+7] = at
end
if out[3] == 0 then
  for key, w in pairs(writes) do store(key, w[1], w[2], w[3], now, w[4], w[5]) end
  return out
end
for i = 1, n do
  local j = (i - 1) * 5
  local cap, p, q, fill, cost = tonumber(ARGV[j+1]), tonumber(ARGV[j+2]), tonumber(ARGV[j+3]), tonumber(ARGV[j+4]), tonumber(ARGV[j+5])
  local last, tokens = load(KEYS[i])
  local at, tk = advance(last, tokens, now, cap, p, q, fill)
  local o = 3 + (i - 1) * 7
  out[o+1] = 0
  out[o+2] = tk
  -- A cost above the capacity only asks for a report: of cost-(cap+1),
  -- itself capped (a take that can never pass reports a full refill).
  if cost > cap then cost = cost - (cap + 1) end
  if cost > cap then cost = cap end
  out[o+3], out[o+4] = wait(at, tk, cost, now, p, q)
  out[o+5], out[o+6] = wait(at, tk, cap, now, p, q)
  out[o+7] = at
end
return out
`

// refundScript gives back a take made by takeScript: KEYS[1], ARGV capacity,
// p, q, fill, cost and the tick the take stored. It returns the cost less the
// refill the bucket received since the take (engine.AllowAll's give-back), at
// most up to the capacity, so that the bucket never holds more than it would
// had the take never been made. The reply is {seconds, microseconds}.
const refundScript = luaLib + `
local cap, p, q, fill, cost, took = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local key = KEYS[1]
local last, tokens = load(key)
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
return {tonumber(tm[1]), tonumber(tm[2])}
`
