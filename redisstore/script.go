package redisstore

// The scripts keep one string per bucket, two integers: the microsecond
// (Redis TIME, since the Unix epoch) the bucket was last updated at, and the
// quanta (thousandths of a token) it held then. A missing key is a full
// bucket. (A string rather than a hash: GET and SET with PX are two calls
// from Lua where HMGET, HSET and PEXPIRE were three, a fifth of the script's
// cost on the server.) All arithmetic is on Lua numbers (float64) holding
// integers below 2^53; Config.units picks the rate fraction p/q so that every
// intermediate value stays below that bound (see doc.go, "Units").
//
// The helpers mirror package fixedpoint with one microsecond as the tick:
// the refill grid G(t) = floor(t*p/q) quanta at microsecond t, its phase
// (t*p mod q), Credit, Boundary and Advance. (The wait until a count is
// reached is computed in Go, units.wait.) Products that could pass 2^53 go through muldiv, which never forms them.
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
-- A bucket is one string, "<tick> <quanta>", both integers written by
-- string.format's %d (never tostring, whose 14 digits would round them).
-- (Arithmetic on the strings converts them as tonumber does, without a
-- function call.)
local function load(key)
  local v = redis.call('GET', key)
  if not v then return nil, nil end
  local i = string.find(v, ' ', 1, true)
  return string.sub(v, 1, i - 1) + 0, string.sub(v, i + 1) + 0
end
-- store writes a bucket at tick at; a full bucket is a missing key. Its TTL
-- must not end before the bucket is full again, or Redis would forget a
-- bucket still refilling, and it need not be exact: a key outliving its
-- bucket's refill holds a full bucket, which reads as a missing one. So it
-- is the refill's upper bound (at-now) + (cap-tokens)*q/p microseconds, in
-- floating point (its rounding is far below the microsecond added), in
-- milliseconds rounded up, plus one, as Redis measures expiry from its clock
-- at the command's start, which may lag TIME by up to a millisecond. (The
-- exact wait is computed by the caller; here it would cost the server more
-- than the rest of the refill.) The TTL goes as a string: a number argument
-- costs redis.call a slow conversion.
local function store(key, at, tokens, cap, now, p, q)
  if tokens >= cap then
    redis.call('DEL', key)
    return
  end
  local ms = math.ceil((at - now + (cap - tokens) * q / p + 1) / 1000) + 1
  redis.call('SET', key, string.format('%d %d', at, tokens), 'PX', string.format('%d', ms))
end
local tm = redis.call('TIME')
local now = tm[1] * 1000000 + tm[2]
`

// takeEachScript makes KEYS' takes one by one, each on its own, at one
// reading of Redis TIME: the common call (one key), and a batch of
// concurrent checks of one Limiter. ARGV is the capacity, p, q and fill of
// the Limiter, in the units above, then one cost per key: 0 peeks, and a
// cost above the capacity takes nothing and denies (the caller reads it as
// a request for a report). The reply is {now, then three integers per key:
// denied (0 or 1), the tick the bucket's state is taken at, and the quanta
// it holds (after the take, if it was made)}; now is Redis TIME in
// microseconds. The caller derives RetryAfter and ResetAfter from that state
// (see units.wait), in exact integer arithmetic that Lua's float64 numbers
// would need more server time for than the rest of a take. A key listed
// twice sees its first take, as consecutive calls do.
const takeEachScript = luaLib + `
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
`

// takeScript takes ARGV costs from KEYS, all or none, at Redis TIME. ARGV
// holds five integers per key: capacity, p, q, fill and cost, as
// takeEachScript's. The reply is {now, denied, then two integers per key:
// the tick and the quanta of its bucket}; denied is 0 when every take was
// made, else the 1-based index of the first denied take: then nothing was
// written and each key reports its bucket as it is. Takes run in order
// against the state the earlier takes left, so a key listed twice pays
// twice, as it does in engine.Engine.TakeAllAt.
const takeScript = luaLib + `
local n = #KEYS
local cur = {}
local out = {now, 0}
local writes = {}
for i = 1, n do
  local j = (i - 1) * 5
  local cap, p, q, fill, cost = ARGV[j+1] + 0, ARGV[j+2] + 0, ARGV[j+3] + 0, ARGV[j+4] + 0, ARGV[j+5] + 0
  local key = KEYS[i]
  local s = cur[key]
  local last, tokens
  if s then last, tokens = s[1], s[2] else last, tokens = load(key) end
  local at, tk = advance(last, tokens, now, cap, p, q, fill)
  if cost > 0 then
    if tk < cost then
      out[2] = i
      break
    end
    tk = tk - cost
    cur[key] = {at, tk}
    -- A key listed twice is written once, with its last state.
    writes[key] = {at, tk, cap, p, q}
  end
  out[2*i+1], out[2*i+2] = at, tk
end
if out[2] == 0 then
  for key, w in pairs(writes) do store(key, w[1], w[2], w[3], now, w[4], w[5]) end
  return out
end
for i = 1, n do
  local j = (i - 1) * 5
  local cap, p, q, fill = ARGV[j+1] + 0, ARGV[j+2] + 0, ARGV[j+3] + 0, ARGV[j+4] + 0
  local last, tokens = load(KEYS[i])
  out[2*i+1], out[2*i+2] = advance(last, tokens, now, cap, p, q, fill)
end
return out
`

// refundScript gives back a take made by a take script: KEYS[1], ARGV
// capacity, p, q, fill, cost and the tick the take stored. It returns the
// cost less the refill the bucket received since the take (the give-back of
// engine.Engine.TakeAllAt), at most up to the capacity, so that the bucket
// never holds more than it would had the take never been made. The reply is
// {now}.
const refundScript = luaLib + `
local cap, p, q, fill, cost, took = ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0
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
return {now}
`
