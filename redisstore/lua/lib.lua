-- The library every bucket script starts with (see script.go for how the
-- scripts are put together; the comment lines at the top of each file are
-- its documentation and are not sent to Redis).
--
-- The scripts keep one string per bucket, two integers: the microsecond
-- (Redis TIME, since the Unix epoch) the bucket was last updated at, and the
-- quanta (thousandths of a token) it held then. A missing key is a full
-- bucket. (A string rather than a hash: GET and SET with PX are two calls
-- from Lua where HMGET, HSET and PEXPIRE were three, a fifth of the script's
-- cost on the server.) All arithmetic is on Lua numbers (float64) holding
-- integers below 2^53; Config.units picks the rate fraction p/q so that every
-- intermediate value stays below that bound (see doc.go, "Units").
--
-- The helpers mirror package fixedpoint with one microsecond as the tick:
-- the refill grid G(t) = floor(t*p/q) quanta at microsecond t, its phase
-- (t*p mod q), Credit, Boundary and Advance. (The wait until a count is
-- reached is computed in Go, units.wait.) Products that could pass 2^53 go
-- through muldiv, which never forms them. The library ends by reading Redis
-- TIME into now.

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
