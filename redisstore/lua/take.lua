-- take takes ARGV costs from KEYS, all or none, at Redis TIME. ARGV holds
-- five integers per key: capacity, p, q, fill and cost, as take_each's, or
-- for a calendar quota capacity, 0, b1, b2 and cost (see quota_lib.lua).
-- The reply is {now, denied, then two integers per key: the tick and the
-- quanta of its bucket, or the end and the quanta used of its quota's
-- period}; denied is 0 when every take was made, else the 1-based index of
-- the first denied take: then nothing was written and each key reports its
-- state as it is (a denied quota take: as it found it, after the earlier
-- takes). A denied of -i reports that quota take i needed a new
-- period with the server's clock past b2: nothing was written. Takes run in
-- order against the state the earlier takes left, so a key listed twice
-- pays twice, as it does in engine.Engine.TakeAllAt.

local n = #KEYS
local cur = {}
local out = {now, 0}
local writes = {}
for i = 1, n do
  local j = (i - 1) * 5
  local cap, p, q, fill, cost = ARGV[j+1] + 0, ARGV[j+2] + 0, ARGV[j+3] + 0, ARGV[j+4] + 0, ARGV[j+5] + 0
  local key = KEYS[i]
  local s = cur[key]
  local at, tk
  if p == 0 then
    if s then at, tk = s[1], s[2] else at, tk = period(key, q, fill) end
    if at == nil then
      out[2] = -i
      return out
    end
    -- A peek too is denied over a quota lowered below what was used.
    if cost <= cap then
      if tk + cost > cap then
        -- Reported as found, after the call's earlier takes, as
        -- engine.Quota reports a denial.
        out[2] = i
        out[2*i+1], out[2*i+2] = at, tk
        break
      end
      if cost > 0 then
        tk = tk + cost
        cur[key] = {at, tk}
        writes[key] = {at, tk, cap, 0, q}
      end
    end
  else
    local last, tokens
    if s then last, tokens = s[1], s[2] else last, tokens = load(key) end
    at, tk = advance(last, tokens, now, cap, p, q, fill)
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
  end
  out[2*i+1], out[2*i+2] = at, tk
end
if out[2] == 0 then
  for key, w in pairs(writes) do
    if w[4] == 0 then keep(key, w[1], w[2]) else store(key, w[1], w[2], w[3], now, w[4], w[5]) end
  end
  return out
end
for i = 1, n do
  local j = (i - 1) * 5
  local cap, p, q, fill = ARGV[j+1] + 0, ARGV[j+2] + 0, ARGV[j+3] + 0, ARGV[j+4] + 0
  if p == 0 then
    if i ~= out[2] then
      local e, u = period(KEYS[i], q, fill)
      if e == nil then
        out[2] = -i
        return out
      end
      out[2*i+1], out[2*i+2] = e, u
    end
  else
    local last, tokens = load(KEYS[i])
    out[2*i+1], out[2*i+2] = advance(last, tokens, now, cap, p, q, fill)
  end
end
return out
