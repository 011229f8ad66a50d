// Package pgaudit keeps an audit log of rate-limit denials in PostgreSQL:
// every request a rule of an httplimit.Middleware denies (and every one a
// shadow rule would have) becomes a row of a RateLimitViolation table.
//
// A Writer's Deny is the Middleware's Options.OnDeny. It never waits for the
// database: it puts the denial on a bounded queue, or, when the queue is full,
// drops it and counts it. One goroutine drains the queue in batches, each
// written with one COPY.
//
//	w := pgaudit.NewWriter(pool, pgaudit.Options{})
//	lim, err := httplimit.New(rules, httplimit.Options{OnDeny: w.Deny})
//	...
//	defer w.Close(ctx) // writes what is queued, until ctx ends
//
// # The table
//
// Install creates it, with the columns and indexes of the seed design (see
// Schema), and two columns the seed lacks: rule_name, the rule (or limit)
// that denied, since rule_id is known only when rules live in the
// database, and shadow, which tells a shadow rule's would-deny from a
// denial. Rows map from httplimit.Denial so:
//
//	bucket_key      the bucket key (Denial.Key), at most 256 characters
//	user_id         Denial.Identity if it is a decimal int64 in canonical
//	                form ("42", not "042"), else NULL; an identity that is
//	                not a number is in bucket_key anyway, as the rule keys by it
//	ip_address      the client's whole address, NULL if unknown
//	endpoint        "METHOD /path", at most 255 characters
//	requested_at    when the decision was made
//	tokens_at_time  the tokens the bucket held at the decision
//	rule_id         Options.RuleID of the name in rule_name (else of the
//	                rule's), else NULL
//	rule_name       the name of the limit that denied (Denial.Limit) for a
//	                rule with several, else the rule's
//	shadow          true for a shadow rule's would-deny
//
// A bucket key or endpoint longer than its column is cut at a character
// boundary and ends with "…" and 16 hex digits of the SHA-256 of the whole
// value, so that two long keys with one prefix stay apart. Text that is not
// UTF-8, and NUL bytes, which PostgreSQL's text cannot hold, become U+FFFD.
//
// # When the database is slow or away
//
// The request path is never affected. A COPY that fails for the connection
// (or outlives Options.BatchTimeout) is retried with a growing backoff, up to
// Options.MaxBackoff, holding its batch; meanwhile denials fill the queue up
// to Options.QueueSize and those beyond are dropped and counted. So an outage
// loses exactly what the queue could not hold: when the database is back,
// the batch in hand and the whole queue are written. A batch the database
// refuses for its content (an SQLSTATE of class 22 or 23, such as a rule_id
// the rules table lacks) is split in halves until the rows it refuses are
// alone; those are counted as Rejected, the others written. Close writes
// what is queued until its context ends; what is left then is Abandoned.
//
// At any quiet moment Stats add up: Recorded = Written + Dropped + Rejected +
// Abandoned + Queued.
package pgaudit
