// Package pgrules keeps the rules of an httplimit.Middleware in a
// PostgreSQL table, one limit per row, in the shape of this seed:
//
//	CREATE TABLE RateLimitRule (
//	    rule_id          BIGSERIAL PRIMARY KEY,
//	    key_pattern      VARCHAR(128)  NOT NULL,  -- 'user:{user_id}', 'endpoint:/api/search'
//	    scope            VARCHAR(32)   NOT NULL,  -- 'user', 'endpoint', 'global', 'ip'
//	    rate_per_second  FLOAT         NOT NULL,
//	    burst_capacity   INT           NOT NULL,
//	    plan             VARCHAR(32),             -- NULL: every plan
//	    is_active        BOOLEAN       NOT NULL DEFAULT TRUE,
//	    description      TEXT,
//	    created_at       TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
//	    -- calendar quotas; NULL in a token bucket's row
//	    quota_period     VARCHAR(8),              -- 'day', 'week', 'month', 'year'
//	    time_zone        VARCHAR(64),             -- IANA name; NULL: UTC
//	    anchor_month     SMALLINT,                -- a year's first month, 1-12
//	    anchor_day       SMALLINT,                -- a month's first day, 1-31
//	    anchor_weekday   VARCHAR(9),              -- a week's first day, 'monday'-'sunday'
//	    anchor_hour      SMALLINT                 -- the hour a period begins, 0-23
//	);
//
// The seed's UNIQUE (key_pattern, plan) is not there: rows sharing a key
// are the limits of one rule. Install creates the table if missing; on an
// existing table it adds the quota columns and drops that constraint. It
// also (re)creates a trigger that notifies a channel on every change.
// Source reads the active rows as httplimit rules (it is an
// httplimit.RuleSource, as a rules file is); Watcher re-reads them on each
// notification and, in case one is missed, every minute.
//
// # Mapping
//
// The rows sharing a scope, key_pattern and plan are one rule, decided all
// or none: a request takes a token from every row's limit or from none.
// A row is a token bucket (quota_period NULL) of rate_per_second and
// burst_capacity, or a calendar quota (quota_period set) of burst_capacity
// tokens per period, renewed whole when the next period begins (in
// time_zone, at the anchor; see httplimit.Limit), with rate_per_second 0.
// A request costs 1.
//
// Names keep a row's buckets across reloads while its scope and
// key_pattern stay, whatever else changes (its rate, burst or plan, rows
// joining or leaving its key). A token bucket alone on its key is the rule
// "rule-<rule_id>" (RuleName). Rows that are several on a key, or a
// calendar quota, are the rule "group-<lowest rule_id>" (GroupName) with
// one limit per row, by rule_id, each named "rule-<rule_id>": the name the
// RateLimit headers, metrics and denials give the row. httplimit names a
// limit's buckets, as a rule's, by its name and limit keys, so a row that
// gains or loses a sibling keeps its bucket; the group's name follows its
// lowest rule_id, the buckets do not depend on it.
//
// The keys:
//
//	scope     key_pattern            limit key               match
//	ip        ip:{<name>}            ip:address              -
//	user      user:{<name>}          Mapping.UserKey         -
//	endpoint  endpoint:/<exact path> path                    path = the path
//	global    global                 global                  -
//
// The placeholder's name only documents the pattern: a user is who
// Mapping.UserKey says (by default "jwt:sub", the subject of the verified
// bearer token), a client is its address. Rows whose patterns differ only
// in it key requests the same way, and are not one rule (the later one can
// never apply).
//
// A plan is a tier (see httplimit): a row with a plan matches
// Mapping.PlanKey (by default "jwt:plan") against it, and its rule comes
// before the rule of the rows without one, which applies to every plan
// that has no row of its own for the same key, and to requests without a
// plan. So a plan's rows replace, for that plan, all the rows without a
// plan on the key: a daily quota for every plan does not hold for a plan
// that has only a per-second row.
//
// # Bad rows
//
// A row that cannot be mapped or that httplimit would refuse (a rate out of
// range, a burst below the rate, a quota with a rate, an anchor on a token
// bucket or one its period lacks, an unknown time zone, a claim nobody
// verifies, a rule that could never apply) is left out, and the other
// rules stay in force: Rules returns them with a *RowsError naming every
// such row by rule_id with each of its problems, by column: "rule 7:
// rate_per_second: must be between 1/31622400 (one token per 366 days) and
// 1e9 tokens per second, got -1".
//
// The rows of a key are one rule: when one of them is bad, all of them are
// left out, each named, the others with "left out with rule 7": keeping
// the good rows would silently loosen the limit, which is the rows
// together. The rules themselves are checked by
// httplimit.KeepValid, as a rules file is by httplimit.ParseRules: one
// validation for both.
//
// # Upgrading a table
//
// A table made before calendar quotas, without their columns, is read as
// it is: its rows are token buckets. Install adds the columns, and drops
// the seed's UNIQUE (key_pattern, plan), which takes only one row per
// key_pattern and plan when the plan is not NULL (NULL plans never
// collide in a unique constraint, so such rows could share a key before).
package pgrules
