-- release ends the lease ARGV[5] of the bucket KEYS[1] (leases at KEYS[2])
-- early, giving its unspent quanta, ARGV[6], back to the bucket (at most what
-- the lease holds). ARGV[1..4] are the capacity, p, q and fill. A lease that
-- already expired gives nothing back. The reply is {now, released (0 or 1),
-- the tick and quanta of the bucket, out}.

local id, unspent = ARGV[5], ARGV[6] + 0
local at, tk, out, expired = current()
local released
out, tk, released = finish(id, unspent, out, tk)
if released == 1 or expired > 0 then storeLeased(key, lkey, at, tk, out, cap, p, q) end
return {now, released, at, tk, out}
