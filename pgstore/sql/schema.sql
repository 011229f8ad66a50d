-- The per-check bucket table and the functions that decide, as Install
-- creates them (see Schema and SQL). The placeholders are filled for the
-- Schema: {{table}} and {{table_<suffix>}} are the quoted names of Table and
-- of Table + "_<suffix>", {{unlogged}} is "UNLOGGED " unless Logged, and
-- {{isolation_check}} is isolation_check.sql. Each statement starts at its
-- "-- name:" line; the comment lines right after it are its documentation,
-- which is not sent.
--
-- A row is a bucket that is not full: key, the microsecond since the Unix
-- epoch its state is taken at (tick), the quanta (thousandths of a token) it
-- held then, and the microsecond at which it is full again (expires), after
-- which the row means nothing and Sweep removes it. A missing row is a full
-- bucket; so is a row with negative quanta, which take_all writes to have a
-- row to lock. Only tick, quanta and expires change on a take, none of them
-- indexed, so takes are heap-only updates: no index grows with them.
--
-- The rate is a fraction p/q of quanta per microsecond, in numeric, exact:
-- the configured float64 rate times 1000/1e6. The refill grid is the
-- engine's: G(t) = floor(t*p/q) quanta at microsecond t, credited by
-- differences of G, so no fraction of a quantum is lost between updates; a
-- bucket found full is stamped at the grid's next whole quantum.
--
-- The functions look rows up by key only, and turn sequential scans off:
-- after a sweep the table's statistics say it is nearly empty, and a plan
-- made then would scan the whole table for every take of the flood of new
-- keys that may follow (each take slower than the last).

-- name: table
CREATE {{unlogged}}TABLE IF NOT EXISTS {{table}} (
	key     bytea  PRIMARY KEY,
	tick    bigint NOT NULL,
	quanta  bigint NOT NULL,
	expires bigint NOT NULL,
	counts  bigint[]
) WITH (fillfactor = 80);

-- name: counts
-- counts is the column of strict windows (see take_all), added to a table
-- created before them. A bucket's row leaves it NULL, which costs the row
-- nothing (its null bitmap fits in the header's padding). The check comes
-- first: ALTER TABLE would lock the table on every Install.
DO $do$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = '{{table}}'::regclass AND attname = 'counts' AND NOT attisdropped) THEN
		ALTER TABLE {{table}} ADD COLUMN counts bigint[];
	END IF;
END
$do$;

-- name: advance
-- advance is the bucket's tick and quanta at microsecond now
-- (fixedpoint.Advance with a microsecond tick): a missing or placeholder
-- row is full at the grid's next whole quantum; time never moves a bucket
-- back.
CREATE OR REPLACE FUNCTION {{table_advance}}(
	present boolean, last bigint, tokens bigint, now bigint, cap bigint, p numeric, q numeric,
	OUT at bigint, OUT tk bigint)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
	ph numeric;
BEGIN
	IF present AND tokens >= 0 THEN
		at := greatest(last, now);
		tk := tokens;
		IF at > last AND tk < cap THEN
			tk := least(cap, tk + div(mod(last * p, q) + (at - last) * p, q));
		END IF;
		IF tk < cap OR now < last THEN
			RETURN;
		END IF;
	END IF;
	tk := cap;
	ph := mod(now * p, q);
	at := now;
	IF ph > 0 THEN
		at := now + div(q - ph + p - 1, p);
	END IF;
END
$fn$;

-- name: full
-- full is the first microsecond at which a bucket holding tk at at holds
-- cap: when its row may go.
CREATE OR REPLACE FUNCTION {{table_full}}(at bigint, tk bigint, cap bigint, p numeric, q numeric)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
	SELECT div((div(at * p, q) + cap - tk) * q + p - 1, p)::bigint
$fn$;

-- name: period
-- period is the end of a calendar quota's period at microsecond now (see
-- take_all): the row's, if it used something (quanta above 0) in a period
-- that ends after now, else b1 or b2, whichever is the first after now;
-- NULL when now is at or past b2.
CREATE OR REPLACE FUNCTION {{table_period}}(
	present boolean, e bigint, used bigint, now bigint, b1 bigint, b2 bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
	SELECT CASE
		WHEN present AND used > 0 AND e > now THEN e
		WHEN now < b1 THEN b1
		WHEN now < b2 THEN b2
	END
$fn$;

-- name: slide
-- slide is a strict window's slot at microsecond now and its counts there
-- (see take_all), as engine.Window moves them: slot of now, counts of the
-- slots from it back k, the ones that left the window cleared; a key whose
-- newest slot is later (a clock that stepped back) stays in that slot.
-- A missing or placeholder row, or one whose counts all left, is empty.
CREATE OR REPLACE FUNCTION {{table_slide}}(
	present boolean, newest bigint, counts bigint[], now bigint, len numeric, k int,
	OUT s bigint, OUT c bigint[], OUT total bigint)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
	s := div(now * 1000::numeric, len)::bigint;
	IF NOT present OR counts IS NULL OR cardinality(counts) <> k + 1 OR s - newest > k THEN
		c := array_fill(0::bigint, ARRAY[k + 1]);
		total := 0;
		RETURN;
	END IF;
	IF s <= newest THEN
		s := newest;
		c := counts;
	ELSE
		c := counts[s - newest + 1:k + 1] || array_fill(0::bigint, ARRAY[(s - newest)::int]);
	END IF;
	SELECT coalesce(sum(x), 0)::bigint INTO total FROM unnest(c) x;
END
$fn$;

-- name: take
-- take makes the takes one after another, each as if alone, at one
-- reading of the clock (the database's unless at_us is given: tests). A
-- cost of 0 peeks; a cost above cap takes nothing and reports. The reply
-- is the time and, per take, whether it was denied and the bucket's tick
-- and quanta (after the take, if made). A run of takes of one key (the
-- batch of a key's waiting callers) reads the row once without locking,
-- decides every take of the run in order in memory, and writes once if
-- any took, with a compare-and-swap on the state it read (UPDATE ... WHERE
-- tick and quanta are still those), the whole run retried on a concurrent
-- change, which the row lock of the UPDATE serialises: a row version per
-- run, not per take, and a run of denials or peeks writes and locks
-- nothing. lock_ms bounds the wait for a row lock (a stuck transaction's):
-- past it the statement fails and takes nothing.
CREATE OR REPLACE FUNCTION {{table_take}}(
	keys bytea[], cap bigint, p numeric, q numeric, costs bigint[], lock_ms int, at_us bigint DEFAULT NULL,
	OUT now_us bigint, OUT denied boolean[], OUT at_of bigint[], OUT q_of bigint[])
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
DECLARE
	n int := cardinality(keys);
	i int := 1;
	j int;
	k bytea;
	cost bigint;
	r_tick bigint;
	r_q bigint;
	present boolean;
	took boolean;
	a bigint;
	tk bigint;
	tries int;
BEGIN
{{isolation_check}}
	now_us := coalesce(at_us, floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
	denied := array_fill(false, ARRAY[n]);
	at_of := array_fill(0::bigint, ARRAY[n]);
	q_of := at_of;
	WHILE i <= n LOOP
		k := keys[i];
		-- The run of takes of k is i..j.
		j := i;
		WHILE j < n AND keys[j + 1] = k LOOP
			j := j + 1;
		END LOOP;
		tries := 0;
		LOOP
			SELECT b.tick, b.quanta INTO r_tick, r_q FROM {{table}} b WHERE b.key = k;
			present := FOUND;
			SELECT v.at, v.tk INTO a, tk FROM {{table_advance}}(present, r_tick, r_q, now_us, cap, p, q) v;
			-- A take leaves the bucket stamped a (never before now_us), so
			-- the next take of the run finds it as it was left.
			took := false;
			FOR m IN i..j LOOP
				cost := costs[m];
				denied[m] := cost > cap OR tk < cost;
				IF NOT denied[m] AND cost > 0 THEN
					tk := tk - cost;
					took := true;
				END IF;
				at_of[m] := a;
				q_of[m] := tk;
			END LOOP;
			EXIT WHEN NOT took;
			IF tries = 0 THEN
				PERFORM set_config('lock_timeout', lock_ms::text, true);
			END IF;
			IF present THEN
				UPDATE {{table}} b SET tick = a, quanta = tk, expires = {{table_full}}(a, tk, cap, p, q)
					WHERE b.key = k AND b.tick = r_tick AND b.quanta = r_q;
			ELSE
				INSERT INTO {{table}} (key, tick, quanta, expires)
					VALUES (k, a, tk, {{table_full}}(a, tk, cap, p, q))
					ON CONFLICT (key) DO NOTHING;
			END IF;
			EXIT WHEN FOUND;
			tries := tries + 1;
			IF tries >= 10000 THEN
				RAISE EXCEPTION 'faucet: bucket % changed under 10000 attempts to take', k;
			END IF;
		END LOOP;
		i := j + 1;
	END LOOP;
END
$fn$;

-- name: take_all
-- take_all takes every take's cost, or none, at one reading of the clock;
-- each take has its own cap and rate (several limiters). It first
-- evaluates without locking: a denial returns there, writing and locking
-- nothing. Otherwise it makes sure every key has a row (a placeholder,
-- negative quanta, means full), locks the rows in key order (so that
-- concurrent calls cannot deadlock), evaluates again on the locked state
-- and writes. The reply is the time, the 1-based index of the first
-- denied take (0: all taken), and per take the tick and quanta of its
-- bucket: after the take when all were taken, else as it is. A key listed
-- twice pays twice.
--
-- A take with a negative cap is a calendar quota's: its capacity is -cap,
-- and its p and q are b1 and b2, the ends (Unix microseconds) of the period
-- that holds the instance's clock and of the next, which the instance
-- reads from the calendar. Its row holds the end of the key's period
-- (tick, and expires: Sweep removes it once the period ended) and the
-- quanta used in it. A key that used something in a period ending after
-- now is still in it; otherwise a new period begins, ending at b1 if now
-- is before it, else at b2 if now is before that; otherwise (the
-- database's clock more than a period ahead of the instance's) denied is
-- minus the take's index, and nothing is written. Its reply is the end and
-- the quanta used; a denied quota take reports its period as it found it,
-- after the call's earlier takes.
--
-- A take with a negative p is a strict window's: -p is the length of its
-- slots in nanoseconds (slot i runs from i*-p to (i+1)*-p since the Unix
-- epoch, as engine.Window counts them), q its slots k. Its row holds the
-- key's newest slot (tick), the sum of its counts (quanta), the counts of
-- the k+1 slots up to the newest, oldest first (counts), and the
-- microsecond at which they have all left the window (expires: Sweep
-- removes it then). It is admitted if the sum at now (slide) plus the cost
-- is at most cap. Its reply is the slot and the sum; then, after the n
-- ticks, at_of holds the k+1 counts of each window take, in the order of
-- the takes (a denied window take's as it found them, after the call's
-- earlier takes).
CREATE OR REPLACE FUNCTION {{table_take_all}}(
	keys bytea[], caps bigint[], ps numeric[], qs numeric[], costs bigint[], lock_ms int, at_us bigint DEFAULT NULL,
	OUT now_us bigint, OUT denied int, OUT at_of bigint[], OUT q_of bigint[])
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
DECLARE
	n int := cardinality(keys);
	locked boolean := false;
	tries int := 0;
	rk bytea[];
	rt bigint[];
	rq bigint[];
	j int;
	present boolean;
	r_tick bigint;
	r_q bigint;
	a bigint;
	tk bigint;
	rc text[];
	r_c text;
	wc text[] := array_fill(NULL::text, ARRAY[n]);
	cnt bigint[];
BEGIN
{{isolation_check}}
	now_us := coalesce(at_us, floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
	at_of := array_fill(0::bigint, ARRAY[n]);
	q_of := at_of;
	LOOP
		IF locked THEN
			PERFORM set_config('lock_timeout', lock_ms::text, true);
			INSERT INTO {{table}} (key, tick, quanta, expires)
				SELECT u.k, 0, -1, now_us + 60000000 FROM (SELECT DISTINCT x AS k FROM unnest(keys) x) u ORDER BY u.k
				ON CONFLICT (key) DO NOTHING;
			SELECT array_agg(l.key), array_agg(l.tick), array_agg(l.quanta), array_agg(l.counts::text) INTO rk, rt, rq, rc FROM (
				SELECT b.key, b.tick, b.quanta, b.counts FROM {{table}} b WHERE b.key = ANY(keys) ORDER BY b.key FOR UPDATE) l;
		ELSE
			SELECT array_agg(b.key), array_agg(b.tick), array_agg(b.quanta), array_agg(b.counts::text) INTO rk, rt, rq, rc
				FROM {{table}} b WHERE b.key = ANY(keys);
		END IF;
		denied := 0;
		-- The running state of each take's key: ticks and quanta of the
		-- last earlier take of the same key, else the row's.
		FOR i IN 1..n LOOP
			present := false;
			r_tick := NULL;
			r_q := NULL;
			r_c := NULL;
			FOR m IN REVERSE i-1..1 LOOP
				IF keys[m] = keys[i] THEN
					present := true;
					r_tick := at_of[m];
					r_q := q_of[m];
					r_c := wc[m];
					EXIT;
				END IF;
			END LOOP;
			IF NOT present THEN
				j := array_position(rk, keys[i]);
				IF j IS NOT NULL THEN
					present := true;
					r_tick := rt[j];
					r_q := rq[j];
					r_c := rc[j];
				END IF;
			END IF;
			IF ps[i] < 0 THEN
				SELECT v.s, v.c, v.total INTO a, cnt, tk
					FROM {{table_slide}}(present, r_tick, r_c::bigint[], now_us, -ps[i], qs[i]::int) v;
				at_of[i] := a;
				q_of[i] := tk;
				wc[i] := cnt::text;
				IF costs[i] > caps[i] OR tk + costs[i] > caps[i] THEN
					denied := i;
					EXIT;
				END IF;
				IF costs[i] > 0 THEN
					cnt[qs[i]::int + 1] := cnt[qs[i]::int + 1] + costs[i];
					q_of[i] := tk + costs[i];
					wc[i] := cnt::text;
				END IF;
				CONTINUE;
			END IF;
			IF caps[i] < 0 THEN
				a := {{table_period}}(present, r_tick, r_q, now_us, ps[i]::bigint, qs[i]::bigint);
				IF a IS NULL THEN
					denied := -i;
					RETURN;
				END IF;
				tk := CASE WHEN present AND r_q > 0 AND a = r_tick THEN r_q ELSE 0 END;
				at_of[i] := a;
				q_of[i] := tk;
				IF costs[i] > -caps[i] OR tk + costs[i] > -caps[i] THEN
					denied := i;
					EXIT;
				END IF;
				q_of[i] := tk + costs[i];
				CONTINUE;
			END IF;
			SELECT v.at, v.tk INTO a, tk FROM {{table_advance}}(present, r_tick, r_q, now_us, caps[i], ps[i], qs[i]) v;
			IF costs[i] > caps[i] OR tk < costs[i] THEN
				denied := i;
				EXIT;
			END IF;
			at_of[i] := a;
			q_of[i] := tk - costs[i];
		END LOOP;
		IF denied > 0 THEN
			-- Every key reports its bucket (or its quota's period) as it
			-- is, but a denied quota's, as it was found.
			FOR i IN 1..n LOOP
				j := array_position(rk, keys[i]);
				IF ps[i] < 0 THEN
					CONTINUE WHEN i = denied;
					SELECT v.s, v.c, v.total INTO a, cnt, tk
						FROM {{table_slide}}(j IS NOT NULL, rt[j], rc[j]::bigint[], now_us, -ps[i], qs[i]::int) v;
					at_of[i] := a;
					q_of[i] := tk;
					wc[i] := cnt::text;
					CONTINUE;
				END IF;
				IF caps[i] < 0 THEN
					CONTINUE WHEN i = denied;
					a := {{table_period}}(j IS NOT NULL, rt[j], rq[j], now_us, ps[i]::bigint, qs[i]::bigint);
					IF a IS NULL THEN
						denied := -i;
						RETURN;
					END IF;
					at_of[i] := a;
					q_of[i] := CASE WHEN j IS NOT NULL AND rq[j] > 0 AND a = rt[j] THEN rq[j] ELSE 0 END;
					CONTINUE;
				END IF;
				IF j IS NULL THEN
					SELECT v.at, v.tk INTO a, tk FROM {{table_advance}}(false, NULL, NULL, now_us, caps[i], ps[i], qs[i]) v;
				ELSE
					SELECT v.at, v.tk INTO a, tk FROM {{table_advance}}(true, rt[j], rq[j], now_us, caps[i], ps[i], qs[i]) v;
				END IF;
				at_of[i] := a;
				q_of[i] := tk;
			END LOOP;
			FOR i IN 1..n LOOP
				IF ps[i] < 0 THEN
					at_of := at_of || wc[i]::bigint[];
				END IF;
			END LOOP;
			RETURN;
		END IF;
		-- Only peeks: nothing to write, nothing to lock.
		EXIT WHEN NOT EXISTS (SELECT 1 FROM unnest(costs) c WHERE c > 0);
		IF locked AND coalesce(cardinality(rk), 0) = (SELECT count(DISTINCT x) FROM unnest(keys) x) THEN
			EXIT;
		END IF;
		-- A row vanished between the insert and the lock (Sweep removed a
		-- placeholder past its time): lock again.
		tries := tries + 1;
		IF tries >= 100 THEN
			RAISE EXCEPTION 'faucet: buckets changed under 100 attempts to lock them';
		END IF;
		locked := true;
	END LOOP;
	-- Write each key's last state, skipping keys only peeked.
	FOR i IN REVERSE n..1 LOOP
		IF costs[i] > 0 AND NOT EXISTS (SELECT 1 FROM generate_series(i+1, n) m WHERE keys[m] = keys[i] AND costs[m] > 0) THEN
			IF ps[i] < 0 THEN
				UPDATE {{table}} b SET tick = at_of[i], quanta = q_of[i], counts = wc[i]::bigint[],
					expires = div((at_of[i] + qs[i] + 1) * -ps[i] + 999, 1000)::bigint WHERE b.key = keys[i];
			ELSIF caps[i] < 0 THEN
				UPDATE {{table}} b SET tick = at_of[i], quanta = q_of[i], expires = at_of[i] WHERE b.key = keys[i];
			ELSE
				UPDATE {{table}} b SET tick = at_of[i], quanta = q_of[i], expires = {{table_full}}(at_of[i], q_of[i], caps[i], ps[i], qs[i])
					WHERE b.key = keys[i];
			END IF;
		END IF;
	END LOOP;
	FOR i IN 1..n LOOP
		IF ps[i] < 0 THEN
			at_of := at_of || wc[i]::bigint[];
		END IF;
	END LOOP;
END
$fn$;
