package pgstore

import (
	"context"
	"fmt"
	"strings"
)

// leaseSQL is the tables and functions of leases (package lease), created
// after the per-check ones. A leased bucket is apart from the per-check
// bucket of its key: the take functions know nothing of leases.
//
// Table_lease_buckets holds a key's leased bucket that is not full or has
// quanta out in leases: its tick and quanta as a per-check row's, and the
// quanta its unexpired leases hold (leased). It refills only up to the
// capacity less leased, so the bucket's quanta plus every lease's never
// exceed the capacity: a lease moves tokens, it never mints them. A missing
// row, or one with negative quanta (a placeholder written to have a row to
// lock), is a full bucket with nothing leased. Table_leases holds the
// leases: key, id, quanta, and the microsecond it expires at.
//
// expires is when the row means nothing any more (its leases have ended
// and it has refilled), for sweeping.
func leaseSQL(s Schema) []string {
	kind := "UNLOGGED "
	if s.Logged {
		kind = ""
	}
	fn := func(suffix string) string { return ident(s.Table + suffix) }
	lb, ll := fn("_lease_buckets"), fn("_leases")
	return []string{
		`CREATE ` + kind + `TABLE IF NOT EXISTS ` + lb + ` (
	key     bytea  PRIMARY KEY,
	tick    bigint NOT NULL,
	quanta  bigint NOT NULL,
	leased  bigint NOT NULL,
	expires bigint NOT NULL
) WITH (fillfactor = 80)`,

		`CREATE ` + kind + `TABLE IF NOT EXISTS ` + ll + ` (
	key    bytea  NOT NULL,
	id     text   NOT NULL,
	quanta bigint NOT NULL,
	expiry bigint NOT NULL,
	PRIMARY KEY (key, id)
)`,

		// lease grants a lease of the leased bucket of key k, at one
		// reading of the clock (the database's unless at_us is given:
		// tests). It locks the bucket's row, drops the key's expired
		// leases (their quanta are forfeited), and refills the bucket up
		// to cap less the quanta still leased, on the refill grid of
		// take. If prev is not '', the lease prev ends first, giving back
		// up to unspent of its quanta (ended says whether it was held).
		// Then it grants least(want, the bucket's quanta) for ttl
		// microseconds under lid if that is at least least_q and above 0,
		// else nothing. want 0 with prev '' only reports, without a lock
		// or a write. The reply is the time, the quanta granted, the
		// bucket's tick and quanta after, the quanta leased, the lease's
		// expiry (0 if none granted) and, when nothing was granted, the
		// expiry of the last lease held (0 if none).
		`CREATE OR REPLACE FUNCTION ` + fn("_lease") + `(
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
` + isolationCheck + `	now_us := coalesce(at_us, floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
	granted := 0;
	expiry := 0;
	last_end := 0;
	ended := false;
	IF want <= 0 AND prev = '' THEN
		-- A report: one statement, one snapshot of the row and its leases.
		SELECT b.tick, b.quanta, b.leased, x.gone, x.last INTO r_tick, r_q, r_l, gone, last
			FROM (SELECT 1) one
			LEFT JOIN ` + lb + ` b ON b.key = k
			CROSS JOIN LATERAL (SELECT coalesce(sum(l.quanta) FILTER (WHERE l.expiry <= now_us), 0) AS gone,
				max(l.expiry) FILTER (WHERE l.expiry > now_us) AS last
				FROM ` + ll + ` l WHERE l.key = k) x;
		IF r_q IS NULL OR r_q < 0 THEN
			r_l := 0;
			gone := 0;
		END IF;
		leased := r_l - gone;
		SELECT v.at, v.tk INTO at, tk FROM ` + fn("_advance") + `(r_q IS NOT NULL, r_tick, r_q, now_us, cap - leased, p, q) v;
		IF leased > 0 THEN
			last_end := coalesce(last, 0);
		END IF;
		RETURN;
	END IF;
	PERFORM set_config('lock_timeout', lock_ms::text, true);
	LOOP
		INSERT INTO ` + lb + ` (key, tick, quanta, leased, expires)
			VALUES (k, 0, -1, 0, now_us + 60000000) ON CONFLICT (key) DO NOTHING;
		SELECT b.tick, b.quanta, b.leased INTO r_tick, r_q, r_l FROM ` + lb + ` b WHERE b.key = k FOR UPDATE;
		EXIT WHEN FOUND;
		-- Removed by another call between the insert and the lock.
		tries := tries + 1;
		IF tries >= 100 THEN
			RAISE EXCEPTION 'faucet: leased bucket % changed under 100 attempts to lock it', k;
		END IF;
	END LOOP;
	WITH d AS (DELETE FROM ` + ll + ` l WHERE l.key = k AND l.expiry <= now_us RETURNING l.quanta)
		SELECT coalesce(sum(d.quanta), 0) INTO gone FROM d;
	IF r_q < 0 THEN
		-- A placeholder: full, nothing leased.
		r_l := 0;
		gone := 0;
	END IF;
	leased := r_l - gone;
	SELECT v.at, v.tk INTO at, tk FROM ` + fn("_advance") + `(true, r_tick, r_q, now_us, cap - leased, p, q) v;
	IF prev <> '' THEN
		DELETE FROM ` + ll + ` l WHERE l.key = k AND l.id = prev RETURNING l.quanta INTO held;
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
		INSERT INTO ` + ll + ` (key, id, quanta, expiry) VALUES (k, lid, granted, expiry);
	END IF;
	IF tk >= cap AND leased = 0 THEN
		DELETE FROM ` + lb + ` b WHERE b.key = k;
		RETURN;
	END IF;
	SELECT max(l.expiry) INTO last FROM ` + ll + ` l WHERE l.key = k;
	UPDATE ` + lb + ` b SET tick = at, quanta = tk, leased = leased,
		expires = ` + fn("_full") + `(at, tk, cap, p, q) + greatest(coalesce(last, 0) - now_us, 0)
		WHERE b.key = k;
	IF granted = 0 AND leased > 0 THEN
		last_end := coalesce(last, 0);
	END IF;
END
$fn$`,

		// release ends lease lid of key k early, giving back up to
		// unspent of its quanta (lease with want 0 and prev lid): the
		// time, whether the lease was held (an expired one gives nothing
		// back), and the bucket's tick, quanta and quanta leased after.
		`CREATE OR REPLACE FUNCTION ` + fn("_release") + `(
	k bytea, cap bigint, p numeric, q numeric, lid text, unspent bigint, lock_ms int, at_us bigint DEFAULT NULL,
	OUT now_us bigint, OUT ended boolean, OUT at bigint, OUT tk bigint, OUT leased bigint)
LANGUAGE sql VOLATILE AS $fn$
	SELECT r.now_us, r.ended, r.at, r.tk, r.leased
		FROM ` + fn("_lease") + `(k, cap, p, q, 0, 0, 1, '', lid, unspent, lock_ms, at_us) r
$fn$`,
	}
}

// leaseTables and leaseFuncs are the names of the tables and functions leases add to a
// schema, after Table.
var leaseTables, leaseFuncs = []string{"_lease_buckets", "_leases"}, []string{"_lease", "_release"}

// CheckLeases reports whether the objects that leased limiters need
// (NewLeased, StoreOptions.Lease) exist beside table (DefaultTable if "")
// in db, as Check does for per-check ones, which it checks first. A schema
// that Install created before leases existed lacks them, and Install adds
// them, keeping every bucket; until then the per-check limiters work.
func CheckLeases(ctx context.Context, db DB, table string) error {
	if table == "" {
		table = DefaultTable
	}
	if err := Check(ctx, db, table); err != nil {
		return err
	}
	var regs, tables, names []string
	for _, t := range leaseTables {
		regs, tables = append(regs, ident(table+t)), append(tables, table+t)
	}
	for _, f := range leaseFuncs {
		names = append(names, table+f)
	}
	var missing []string
	err := db.QueryRow(ctx, `SELECT coalesce(array_agg(x.n ORDER BY x.o), '{}') FROM (
	SELECT n, o FROM unnest($1::text[], $2::text[]) WITH ORDINALITY u(r, n, o) WHERE to_regclass(r) IS NULL
	UNION ALL
	SELECT f, 10 + o FROM unnest($3::text[]) WITH ORDINALITY u(f, o)
		WHERE NOT EXISTS (SELECT 1 FROM pg_proc WHERE proname = f AND pg_function_is_visible(oid))) x`,
		regs, tables, names).Scan(&missing)
	if err != nil {
		return fmt.Errorf("pgstore: checking the lease schema of %s: %w", table, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("pgstore: the schema of table %s predates leases (missing %s): run Install again (faucet serve --postgres-install) or the statements of SQL; it adds them and keeps every bucket", table, strings.Join(missing, ", "))
	}
	return nil
}
