-- The statements the background of a Store runs on the bucket table: the
-- heartbeat and the sweeps, with schema.sql's placeholders.

-- name: heartbeat
-- heartbeat upserts the instance's row ($1), stamped with the database's
-- clock, expiring $4 microseconds later, and counts the rows alive then
-- with keys in [$2, $3): the others', plus this one (the statement does not
-- see its own upsert).
WITH c AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now_us),
up AS (INSERT INTO {{table}} (key, tick, quanta, expires) SELECT $1, c.now_us, -1, c.now_us + $4 FROM c
	ON CONFLICT (key) DO UPDATE SET tick = EXCLUDED.tick, quanta = -1, expires = EXCLUDED.expires RETURNING 1)
SELECT 1 + count(*) FROM {{table}} b, c WHERE b.key >= $2 AND b.key < $3 AND b.key <> $1 AND b.expires > c.now_us;

-- name: sweep
-- sweep removes expired rows: the batch walks the primary key from after
-- $1 whatever the rows hold, so that each statement looks at $2 rows at
-- most; of those it locks the rows expired for $3 microseconds that no
-- take holds (SKIP LOCKED: a sweep never waits for a take, and takes wait
-- for it only while it deletes), in key order, and deletes them. The reply
-- is the batch's last key, its size and the rows removed.
WITH batch AS (
	SELECT key FROM {{table}} WHERE key > $1 ORDER BY key LIMIT $2
), doomed AS (
	SELECT b.key FROM {{table}} b JOIN batch USING (key)
	WHERE b.expires <= floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint - $3
	ORDER BY b.key FOR UPDATE OF b SKIP LOCKED
), gone AS (
	DELETE FROM {{table}} d USING doomed WHERE d.key = doomed.key
	RETURNING 1
)
SELECT (SELECT key FROM batch ORDER BY key DESC LIMIT 1), (SELECT count(*) FROM batch), (SELECT count(*) FROM gone);

-- name: sweep_leases
-- sweep_leases does for the leased buckets what sweep does for the
-- per-check rows; a bucket's leases go with it in the same statement, under
-- its row lock, so that no leased quanta are forgotten while the bucket
-- still counts them. The reply adds the leases removed.
WITH batch AS (
	SELECT key FROM {{table_lease_buckets}} WHERE key > $1 ORDER BY key LIMIT $2
), doomed AS (
	SELECT b.key FROM {{table_lease_buckets}} b JOIN batch USING (key)
	WHERE b.expires <= floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint - $3
	ORDER BY b.key FOR UPDATE OF b SKIP LOCKED
), leases AS (
	DELETE FROM {{table_leases}} l USING doomed WHERE l.key = doomed.key
	RETURNING 1
), gone AS (
	DELETE FROM {{table_lease_buckets}} d USING doomed WHERE d.key = doomed.key
	RETURNING 1
)
SELECT (SELECT key FROM batch ORDER BY key DESC LIMIT 1), (SELECT count(*) FROM batch), (SELECT count(*) FROM gone), (SELECT count(*) FROM leases);

-- name: sweep_slots
-- sweep_slots removes up to $1 in-flight slots expired for $2 microseconds
-- (slots of keys that no acquire passed over since their holders died),
-- skipping rows a call holds locked. The reply is the rows removed.
WITH doomed AS (
	SELECT key, holder FROM {{table_slots}}
	WHERE expires <= floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint - $2
	LIMIT $1 FOR UPDATE SKIP LOCKED
), gone AS (
	DELETE FROM {{table_slots}} s USING doomed WHERE s.key = doomed.key AND s.holder = doomed.holder
	RETURNING 1
)
SELECT count(*) FROM gone;
