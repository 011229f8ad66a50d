-- take takes ARGV costs from KEYS, all or none, at Redis TIME. ARGV holds
-- five integers per key: capacity, p, q, fill and cost, as take_each's, or
-- for a calendar quota capacity, 0, b1, b2 and cost (see quota_lib.lua),
-- or for a strict window capacity, -1, the slot's length, the slots k and
-- cost (see window_lib.lua). The reply is {now, denied, then two integers
-- per key: the tick and the quanta of its bucket, the end and the quanta
-- used of its quota's period, or the newest slot and the sum of its
-- window, then the k+1 counts of each window's key, oldest first, in the
-- order of the keys}; denied is 0 when every take was made, else the
-- 1-based index of the first denied take: then nothing was written and
-- each key reports its state as it is (a denied quota or window take: as
-- it found it, after the earlier takes). A denied of -i reports that quota take i needed a new
-- period with the server's clock past b2: nothing was written. Takes run in
-- order against the state the earlier takes left, so a key listed twice
-- pays twice, as it does in engine.Engine.TakeAllAt.

local n = #KEYS
local cur = {}
local out = {now, 0}
local writes = {}
-- ext[i] is the counts window take i reports.
local ext = {}
local function finish()
  for i = 1, n do
    local c = ext[i]
    if c then
      for j = 1, #c do out[#out + 1] = c[j] end
    end
  end
  return out
end
-- wstate is key's window at now: its newest slot, its counts (a table of
-- its own) and their sum.
local function wstate(key, s, len, k)
  local newest, c
  if s then
    newest = s[1]
    c = {}
    for j = 1, k + 1 do c[j] = s[2][j] end
  else
    newest, c = wload(key, k)
  end
  newest = wmove(newest, c, k, slotat(len))
  local sum = 0
  for j = 1, k + 1 do sum = sum + c[j] end
  return newest, c, sum
end
for i = 1, n do
  local j = (i - 1) * 5
  local cap, p, q, fill, cost = ARGV[j+1] + 0, ARGV[j+2] + 0, ARGV[j+3] + 0, ARGV[j+4] + 0, ARGV[j+5] + 0
  local key = KEYS[i]
  local s = cur[key]
  local at, tk
  if p == -1 then
    local c
    at, c, tk = wstate(key, s, q, fill)
    ext[i] = c
    if cost <= cap then
      if tk + cost > cap then
        out[2] = i
        out[2*i+1], out[2*i+2] = at, tk
        break
      end
      if cost > 0 then
        local w = {}
        for j = 1, fill + 1 do w[j] = c[j] end
        w[fill + 1] = w[fill + 1] + cost
        tk = tk + cost
        ext[i] = w
        cur[key] = {at, w}
        writes[key] = {at, w, q, -1, fill}
      end
    end
  elseif p == 0 then
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
    if w[4] == -1 then wkeep(key, w[1], w[2], w[3], w[5])
    elseif w[4] == 0 then keep(key, w[1], w[2]) else store(key, w[1], w[2], w[3], now, w[4], w[5]) end
  end
  return finish()
end
for i = 1, n do
  local j = (i - 1) * 5
  local cap, p, q, fill = ARGV[j+1] + 0, ARGV[j+2] + 0, ARGV[j+3] + 0, ARGV[j+4] + 0
  if p == -1 then
    if i ~= out[2] then
      local at, c, sum = wstate(KEYS[i], nil, q, fill)
      ext[i] = c
      out[2*i+1], out[2*i+2] = at, sum
    end
  elseif p == 0 then
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
return finish()
