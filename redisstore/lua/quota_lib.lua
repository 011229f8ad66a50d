-- The calendar quotas' part of take.lua and refund.lua, after lib.lua. A
-- quota's take is marked by p = 0 (no bucket has a zero rate), and its
-- other arguments are the quota's capacity (quanta), b1 and b2 in the place
-- of q and fill, and the cost. b1 is the end, in Unix milliseconds, of the
-- period that holds the instance's clock, by the take's calendar, b2 the
-- end of the period after it: the instance reads the calendar (Lua has no
-- zone rules), and the server's clock picks between them.
--
-- A quota's key is one string, "<end> <used>": the end of its period in
-- Unix milliseconds, and the quanta taken in it. It expires at the end
-- (PXAT), as a period that ended and a missing key are the same.

-- period returns the end and the quanta used of key's period at now, or
-- nil when a new period must begin and the server's clock is at or past
-- b2: more than a period ahead of the instance's.
local function period(key, b1, b2)
  local e, u = load(key)
  if e ~= nil and u > 0 and e * 1000 > now then return e, u end
  if now < b1 * 1000 then return b1, 0 end
  if now < b2 * 1000 then return b2, 0 end
  return nil, nil
end
-- keep writes key's period; one with nothing used is a missing key.
local function keep(key, e, u)
  if u <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('SET', key, string.format('%d %d', e, u), 'PXAT', string.format('%d', e))
end
