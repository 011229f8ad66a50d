-- isolation_check starts the take functions: the compare-and-swap relies on
-- each statement seeing the latest committed rows (READ COMMITTED); under a
-- stricter isolation a contended take would fail with a serialization error
-- instead of retrying, so another is refused with a clear error. It is a
-- part of the functions' bodies, not a statement.
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'faucet: the bucket functions need READ COMMITTED isolation, the session uses %', current_setting('transaction_isolation')
			USING ERRCODE = '0A000';
	END IF;
