-- The strict windows' part of take.lua and refund.lua, after lib.lua. A
-- window's take is marked by p = -1, and its other arguments are the
-- window's capacity (quanta), the length of a slot in nanoseconds and the
-- window's slots k in the place of q and fill, and the cost. Slot i runs
-- from i*len to (i+1)*len nanoseconds since the Unix epoch, as
-- engine.Window counts them; the server's clock picks it.
--
-- A window's key is one string, "<newest> <c0> ... <ck>": the key's newest
-- slot and the quanta it took in each of the k+1 slots from newest-k to
-- newest. A string rather than a hash: one GET and one SET, and one
-- allocation of about 4 bytes a slot where a hash would hold a field and a
-- value per slot. It expires (PXAT) when slot newest+k+1 begins, when all
-- its counts have left the window: a key whose counts all left and a
-- missing key are the same.

-- slotat is the slot of now (microseconds) for slots of len nanoseconds.
local function slotat(len)
  if len % 1000 == 0 then
    local s = divmod(now, len / 1000)
    return s
  end
  local s = muldiv(now, 1000, len)
  return s
end
-- wload returns key's newest slot (nil: none) and its k+1 counts, oldest
-- first.
local function wload(key, k)
  local c = {}
  local v = redis.call('GET', key)
  local newest
  if v then
    for x in string.gmatch(v, '%d+') do
      if newest == nil then newest = x + 0 else c[#c + 1] = x + 0 end
    end
  end
  if #c ~= k + 1 then
    newest = nil
    for j = 1, k + 1 do c[j] = 0 end
  end
  return newest, c
end
-- wmove moves counts c of a key whose newest slot is newest to slot s,
-- clearing the slots that leave the window, and returns the key's newest
-- slot: s, or newest if s is earlier (a clock that stepped back counts in
-- the key's newest slot, as engine.Window does).
local function wmove(newest, c, k, s)
  if newest == nil or s - newest > k then
    for j = 1, k + 1 do c[j] = 0 end
    return s
  end
  if s <= newest then return newest end
  local d = s - newest
  for j = 1, k + 1 do
    if j + d <= k + 1 then c[j] = c[j + d] else c[j] = 0 end
  end
  return s
end
-- wkeep writes key's counts; a key with nothing counted is a missing key.
local function wkeep(key, newest, c, len, k)
  local sum = 0
  for j = 1, k + 1 do sum = sum + c[j] end
  if sum <= 0 then
    redis.call('DEL', key)
    return
  end
  local ms, r
  if len % 1000 == 0 then
    ms, r = divmod((newest + k + 1) * (len / 1000), 1000)
  else
    ms, r = muldiv(newest + k + 1, len, 1000000)
  end
  if r > 0 then ms = ms + 1 end
  redis.call('SET', key, string.format('%d ', newest) .. table.concat(c, ' '), 'PXAT', string.format('%d', ms))
end
