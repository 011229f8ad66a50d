// Package pgrules keeps the rules of an httplimit.Middleware in a
// PostgreSQL table, one rule per row, in the shape of this seed:
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
//	    UNIQUE (key_pattern, plan)
//	);
//
// Install creates it if missing, with a trigger that notifies a channel
// on every change. Source reads the active rows as httplimit rules (it is
// an httplimit.RuleSource, as a rules file is); Watcher re-reads them on
// each notification and, in case one is missed, every minute.
//
// # Mapping
//
// Each active row becomes one rule named "rule-<rule_id>", so that a row
// keeps its buckets across reloads while its scope and key_pattern stay:
//
//	scope     key_pattern            limit key               match
//	ip        ip:{<name>}            ip:address              -
//	user      user:{<name>}          Mapping.UserKey         -
//	endpoint  endpoint:/<exact path> path                    path = the path
//	global    global                 global                  -
//
// The placeholder's name only documents the pattern: a user is who
// Mapping.UserKey says (by default "jwt:sub", the subject of the verified
// bearer token), a client is its address. The rate is rate_per_second, the
// burst burst_capacity, the cost of a request 1.
//
// A plan is a tier (see httplimit): a row with a plan matches
// Mapping.PlanKey (by default "jwt:plan") against it, and comes before the
// rows without one, which apply to every plan that has no row of its own
// for the same key, and to requests without a plan.
//
// # Bad rows
//
// A row that cannot be mapped or that httplimit would refuse (a rate out of
// range, a burst below the rate, a claim nobody verifies, a rule that could
// never apply) is left out, and the others stay in force: Rules returns
// them with a *RowsError naming every such row by rule_id with each of its
// problems, by column: "rule 7: rate_per_second: must be between
// 1/31622400 (one token per 366 days) and 1e9 tokens per second, got -1".
// The rules themselves are checked by httplimit.KeepValid, as a rules file
// is by httplimit.ParseRules: one validation for both.
package pgrules
