-- The tables and functions of leases (package lease), which Install
-- creates after schema.sql's, with the same placeholders. A leased bucket is
-- apart from the per-check bucket of its key: the take functions know
-- nothing of leases.
--
-- {{table_lease_buckets}} holds a key's leased bucket that is not full or
-- has quanta out in leases: its tick and quanta as a per-check row's, and
-- the quanta its unexpired leases hold (leased). It refills only up to the
-- capacity less leased, so the bucket's quanta plus every lease's never
-- exceed the capacity: a lease moves tokens, it never mints them. A missing
-- row, or one with negative quanta (a placeholder written to have a row to
-- lock), is a full bucket with nothing leased. {{table_leases}} holds the
-- leases: key, id, quanta, and the microsecond it expires at.
--
-- expires is when the row means nothing any more (its leases have ended
-- and it has refilled), for sweeping.

-- name: lease_buckets
CREATE {{unlogged}}TABLE IF NOT EXISTS {{table_lease_buckets}} (
	key     bytea  PRIMARY KEY,
	tick    bigint NOT NULL,
	quanta  bigint NOT NULL,
	leased  bigint NOT NULL,
	expires bigint NOT NULL
) WITH (fillfactor = 80);

-- name: leases
CREATE {{unlogged}}TABLE IF NOT EXISTS {{table_leases}} (
	key    bytea  NOT NULL,
	id     text   NOT NULL,
	quanta bigint NOT NULL,
	expiry bigint NOT NULL,
	PRIMARY KEY (key, id)
);

-- name: lease
-- lease grants a lease of the leased bucket of key k, at one reading of
-- the clock (the database's unless at_us is given: tests). It locks the
-- bucket's row, drops the key's expired leases (their quanta are
-- forfeited), and refills the bucket up to cap less the quanta still
-- leased, on the refill grid of take. If prev is not '', the lease prev
-- ends first, giving back up to unspent of its quanta (ended says whether
-- it was held). Then it grants least(want, the bucket's quanta) for ttl
-- microseconds under lid if that is at least least_q and above 0, else
-- nothing. want 0 with prev '' only reports, without a lock or a write.
-- The reply is the time, the quanta granted, the bucket's tick and quanta
-- after, the quanta leased, the lease's expiry (0 if none granted) and,
-- when nothing was granted, the expiry of the last lease held (0 if none).
CREATE OR REPLACE FUNCTION {{table_lease}}(
	k bytea, cap bigint, p numeric, q numeric, want bigint, least_q bigint, ttl bigint, lid text,
	prev text, unspent bigint, lock_ms int, at_us bigint DEFAULT NULL,
	OUT now_us bigint, OUT granted bigint, OUT at bigint, OUT tk bigint, OUT leased bigint,
	OUT expiry bigint, OUT last_end bigint, OUT ended boolean)
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
#variable_conflict use_variable
DECLARE
	r_tick bigint;
	r_q bigint;
	r_l bigint;
	gone bigint;
	held bigint;
	last bigint;
	tries int := 0;
BEGIN
{{isolation_check}}
	now_us := coalesce(at_us, floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
	granted := 0;
	expiry := 0;
	last_end := 0;
	ended := false;
	IF want <= 0 AND prev = '' THEN
		-- A report: one statement, one snapshot of the row and its leases.
		SELECT b.tick, b.quanta, b.leased, x.gone, x.last INTO r_tick, r_q, r_l, gone, last
			FROM (SELECT 1) one
			LEFT JOIN {{table_lease_buckets}} b ON b.key = k
			CROSS JOIN LATERAL (SELECT coalesce(sum(l.quanta) FILTER (WHERE l.expiry <= now_us), 0) AS gone,
				max(l.expiry) FILTER (WHERE l.expiry > now_us) AS last
				FROM {{table_leases}} l WHERE l.key = k) x;
		IF r_q IS NULL OR r_q < 0 THEN
			r_l := 0;
			gone := 0;
		END IF;
		leased := r_l - gone;
		SELECT v.at, v.tk INTO at, tk FROM {{table_advance}}(r_q IS NOT NULL, r_tick, r_q, now_us, cap - leased, p, q) v;
		IF leased > 0 THEN
			last_end := coalesce(last, 0);
		END IF;
		RETURN;
	END IF;
	PERFORM set_config('lock_timeout', lock_ms::text, true);
	LOOP
		INSERT INTO {{table_lease_buckets}} (key, tick, quanta, leased, expires)
			VALUES (k, 0, -1, 0, now_us + 60000000) ON CONFLICT (key) DO NOTHING;
		SELECT b.tick, b.quanta, b.leased INTO r_tick, r_q, r_l FROM {{table_lease_buckets}} b WHERE b.key = k FOR UPDATE;
		EXIT WHEN FOUND;
		-- Removed by another call between the insert and the lock.
		tries := tries + 1;
		IF tries >= 100 THEN
			RAISE EXCEPTION 'faucet: leased bucket % changed under 100 attempts to lock it', k;
		END IF;
	END LOOP;
	WITH d AS (DELETE FROM {{table_leases}} l WHERE l.key = k AND l.expiry <= now_us RETURNING l.quanta)
		SELECT coalesce(sum(d.quanta), 0) INTO gone FROM d;
	IF r_q < 0 THEN
		-- A placeholder: full, nothing leased.
		r_l := 0;
		gone := 0;
	END IF;
	leased := r_l - gone;
	SELECT v.at, v.tk INTO at, tk FROM {{table_advance}}(true, r_tick, r_q, now_us, cap - leased, p, q) v;
	IF prev <> '' THEN
		DELETE FROM {{table_leases}} l WHERE l.key = k AND l.id = prev RETURNING l.quanta INTO held;
		IF FOUND THEN
			ended := true;
			leased := leased - held;
			tk := tk + least(greatest(unspent, 0), held);
		END IF;
	END IF;
	IF want > 0 THEN
		granted := least(want, tk);
		IF granted < least_q THEN
			granted := 0;
		END IF;
	END IF;
	IF granted > 0 THEN
		tk := tk - granted;
		leased := leased + granted;
		expiry := now_us + ttl;
		INSERT INTO {{table_leases}} (key, id, quanta, expiry) VALUES (k, lid, granted, expiry);
	END IF;
	IF tk >= cap AND leased = 0 THEN
		DELETE FROM {{table_lease_buckets}} b WHERE b.key = k;
		RETURN;
	END IF;
	SELECT max(l.expiry) INTO last FROM {{table_leases}} l WHERE l.key = k;
	UPDATE {{table_lease_buckets}} b SET tick = at, quanta = tk, leased = leased,
		expires = {{table_full}}(at, tk, cap, p, q) + greatest(coalesce(last, 0) - now_us, 0)
		WHERE b.key = k;
	IF granted = 0 AND leased > 0 THEN
		last_end := coalesce(last, 0);
	END IF;
END
$fn$;

-- name: release
-- release ends lease lid of key k early, giving back up to unspent of its
-- quanta (lease with want 0 and prev lid): the time, whether the lease was
-- held (an expired one gives nothing back), and the bucket's tick, quanta
-- and quanta leased after.
CREATE OR REPLACE FUNCTION {{table_release}}(
	k bytea, cap bigint, p numeric, q numeric, lid text, unspent bigint, lock_ms int, at_us bigint DEFAULT NULL,
	OUT now_us bigint, OUT ended boolean, OUT at bigint, OUT tk bigint, OUT leased bigint)
LANGUAGE sql VOLATILE AS $fn$
	SELECT r.now_us, r.ended, r.at, r.tk, r.leased
		FROM {{table_lease}}(k, cap, p, q, 0, 0, 1, '', lid, unspent, lock_ms, at_us) r
$fn$;
