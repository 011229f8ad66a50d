-- take takes ARGV costs from KEYS, all or none, at Redis TIME. ARGV holds
-- five integers per key: capacity, p, q, fill and cost, as take_each's. The
-- reply is {now, denied, then two integers per key: the tick and the quanta
-- of its bucket}; denied is 0 when every take was made, else the 1-based
-- index of the first denied take: then nothing was written and each key
-- reports its bucket as it is. Takes run in order against the state the
-- earlier takes left, so a key listed twice pays twice, as it does in
-- engine.Engine.TakeAllAt.

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
