-- The library of the lease scripts, after lib.lua's.
--
-- The lease scripts keep a leased bucket apart from the per-check ones: a
-- string "<tick> <quanta> <out>" at the bucket's key, where out is the quanta
-- held in unexpired leases, and a sorted set beside it (same hash tag) with
-- one member "<id> <quanta>" per lease, scored by the microsecond it expires
-- at. A lease takes its quanta from the bucket like a take, and the bucket
-- refills only up to the capacity less out. So the bucket's tokens plus
-- every token an instance still holds never exceed the capacity, and the
-- tokens admitted in any interval, spent from leases or not, are at most
-- the capacity plus the refill of the interval: a lease moves tokens, it
-- never mints them. An expired lease's unspent quanta are forfeited (the
-- instance stopped spending them by then); a released lease's unspent
-- quanta go back to the bucket, which keeps the sum as it was.

local function loadLeased(key)
  local v = redis.call('GET', key)
  if not v then return nil, nil, 0 end
  local i = string.find(v, ' ', 1, true)
  local j = string.find(v, ' ', i + 1, true)
  return string.sub(v, 1, i - 1) + 0, string.sub(v, i + 1, j - 1) + 0, string.sub(v, j + 1) + 0
end
-- purge drops the leases that expired by now and returns the quanta they
-- held.
local function purge(lkey)
  local gone = redis.call('ZRANGEBYSCORE', lkey, '-inf', now)
  local back = 0
  for _, m in ipairs(gone) do
    local i = string.find(m, ' ', 1, true)
    back = back + (string.sub(m, i + 1) + 0)
  end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', lkey, '-inf', now) end
  return back
end
-- storeLeased writes a leased bucket; one that holds the capacity with
-- nothing leased is a missing key. The bucket and its leases expire
-- together, once the last lease has ended and the refill has reached the
-- capacity, when the bucket would read full: the leases must outlive their
-- own expiry until a call purges them, or out would keep their quanta.
local function storeLeased(key, lkey, at, tokens, out, cap, p, q)
  if tokens >= cap and out == 0 then
    redis.call('DEL', key)
    return
  end
  local last = 0
  if out > 0 then
    local top = redis.call('ZRANGE', lkey, -1, -1, 'WITHSCORES')
    if #top == 2 and top[2] - now > 0 then last = top[2] - now end
  end
  local ms = string.format('%d', math.ceil((at - now + (cap - tokens) * q / p + last + 1) / 1000) + 1)
  redis.call('SET', key, string.format('%d %d %d', at, tokens, out), 'PX', ms)
  if out > 0 then redis.call('PEXPIRE', lkey, ms) end
end
-- current reads the leased bucket KEYS[1] with its leases at KEYS[2] at
-- now, after purging the expired leases: the bucket's tick and quanta (it
-- refills up to the capacity less what leases hold), out, and the quanta
-- the purge freed (a state to write back even if nothing else changes).
local cap, p, q, fill = ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local key, lkey = KEYS[1], KEYS[2]
local function current()
  local last, tokens, out = loadLeased(key)
  local expired = purge(lkey)
  out = out - expired
  local at, tk = advance(last, tokens, now, cap - out, p, q, fill)
  return at, tk, out, expired
end
-- finish ends lease id early, giving back up to unspent of its quanta; it
-- returns the new out and tokens, and whether the lease was held (an
-- expired one, already purged, gives nothing back).
local function finish(id, unspent, out, tk)
  local prefix = id .. ' '
  for _, m in ipairs(redis.call('ZRANGE', lkey, 0, -1)) do
    if string.sub(m, 1, #prefix) == prefix then
      local held = string.sub(m, #prefix + 1) + 0
      redis.call('ZREM', lkey, m)
      return out - held, tk + math.min(unspent, held), 1
    end
  end
  return out, tk, 0
end
