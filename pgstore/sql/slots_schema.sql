-- The table and functions of in-flight slots (engine.Slots), which Install
-- creates after lease_schema.sql's, with schema.sql's placeholders. A row
-- of {{table_slots}} is one slot: the key (the store's Prefix, the limit's
-- quoted name, ":inflight:", the request's key as the buckets bound it),
-- the holder, and the microsecond of the database's clock at which it
-- expires unless renewed. A slot is held while the clock is before it.
-- The table is apart from the buckets', whose sweeps and take functions
-- know nothing of it.

-- name: slots
CREATE {{unlogged}}TABLE IF NOT EXISTS {{table_slots}} (
	key     bytea  NOT NULL,
	holder  bytea  NOT NULL,
	expires bigint NOT NULL,
	PRIMARY KEY (key, holder)
);

-- name: slots_acquire
-- slots_acquire takes one of k's slots for holder h if fewer than max_n
-- are held, for ttl_us microseconds, and returns whether it did and how
-- many are held after (or, denied, are held). A holder that holds is
-- renewed and admitted without a second slot. Acquires of one key take
-- turns on an advisory lock of the key's hash, held to the end of the
-- transaction, and read the clock and count the rows once they have it:
-- under READ COMMITTED each statement then sees every slot an earlier
-- acquire committed, so the count is exact however many instances
-- acquire. The rows it changes, k's expired ones (deleted on the way) and
-- h's, it locks first, in holder order, as slots_renew locks rows, so
-- that the two never deadlock.
CREATE OR REPLACE FUNCTION {{table_slots_acquire}}(k bytea, h bytea, max_n integer, ttl_us bigint,
	OUT ok boolean, OUT held integer)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
	now_us bigint;
	r record;
	mine boolean := false;
BEGIN
{{isolation_check}}
	PERFORM pg_advisory_xact_lock(hashtext('faucet in-flight slots'), hashtext(encode(k, 'hex')));
	now_us := floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
	FOR r IN SELECT holder, expires FROM {{table_slots}} WHERE key = k AND (expires <= now_us OR holder = h)
		ORDER BY holder FOR UPDATE LOOP
		IF r.expires <= now_us THEN
			DELETE FROM {{table_slots}} WHERE key = k AND holder = r.holder;
		ELSE
			mine := true;
		END IF;
	END LOOP;
	SELECT count(*) INTO held FROM {{table_slots}} WHERE key = k;
	IF mine THEN
		UPDATE {{table_slots}} SET expires = now_us + ttl_us WHERE key = k AND holder = h;
		ok := true;
		RETURN;
	END IF;
	IF held >= max_n THEN
		ok := false;
		RETURN;
	END IF;
	INSERT INTO {{table_slots}} (key, holder, expires) VALUES (k, h, now_us + ttl_us);
	ok := true;
	held := held + 1;
END
$fn$;

-- name: slots_release
-- slots_release deletes holder h's slot of k, if any, and returns how many
-- it deleted.
CREATE OR REPLACE FUNCTION {{table_slots_release}}(k bytea, h bytea)
RETURNS bigint LANGUAGE sql VOLATILE AS $fn$
	WITH d AS (DELETE FROM {{table_slots}} WHERE key = k AND holder = h RETURNING 1)
	SELECT count(*) FROM d
$fn$;

-- name: slots_renew
-- slots_renew keeps the slot of holder hs[i] of ks[i], for each i, held
-- ttl_us microseconds from now if it is still held (a slot that expired
-- or was released is not taken again), and returns how many it renewed.
-- It locks the rows in key and holder order, as slots_acquire does.
CREATE OR REPLACE FUNCTION {{table_slots_renew}}(ks bytea[], hs bytea[], ttl_us bigint)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
	now_us bigint := floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
	n bigint;
BEGIN
	WITH l AS (
		SELECT s.key, s.holder FROM {{table_slots}} s JOIN unnest(ks, hs) u(key, holder)
			ON s.key = u.key AND s.holder = u.holder
		WHERE s.expires > now_us ORDER BY s.key, s.holder FOR UPDATE OF s
	)
	UPDATE {{table_slots}} s SET expires = now_us + ttl_us FROM l WHERE s.key = l.key AND s.holder = l.holder;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$fn$;
