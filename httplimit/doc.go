// Package httplimit rate-limits HTTP requests with faucet's token buckets:
// rules in a JSON vocabulary compatible with fairvisor's, the RateLimit
// header fields of draft-ietf-httpapi-ratelimit-headers-10, tiers, per-user /
// per-tenant / global hierarchies that must all pass, and a pluggable store
// for buckets shared between instances. It imports only the standard library
// and faucet's engine.
//
//	rules, err := httplimit.ParseRules(data)
//	...
//	lim, err := httplimit.New(rules, httplimit.Options{})
//	...
//	http.ListenAndServe(addr, lim.Handler(app))
//
// # Rules
//
// A rules document is {"rules": [ ... ]}; each rule is an object:
//
//	{
//	  "name": "free",                        // required, unique, printable ASCII
//	  "limit_keys": ["header:x-api-key"],    // required: one bucket per value
//	  "algorithm": "token_bucket",           // optional; the only algorithm
//	  "algorithm_config": {
//	    "tokens_per_second": 10,             // or its alias "rps"; not both
//	    "burst": 20,                         // required, >= the rate
//	    "cost_source": "fixed",              // or "header:<name>", "query:<name>"
//	    "fixed_cost": 1,                     // cost with "fixed" (default 1)
//	    "default_cost": 1,                   // cost when the source is unusable (default 1)
//	    "min_cost": 1,                       // bounds of a client's cost (default
//	    "max_cost": 20,                      //   default_cost, and none)
//	    "cost_out_of_range": "clamp"         // or "reject" (400)
//	  },
//	  "match": {"jwt:plan": "enterprise"},   // optional: when the rule applies
//	  "mode": "enforce",                     // or "shadow"
//	  "fail_mode": "fallback",               // or "open", "closed" (faucet's extension)
//	  "insecure_unverified_jwt": false       // see JWT claims
//	}
//
// A rule may instead carry several limits on its key, decided together
// (Rule.Limits): "limits": [{"name": "api-key-second", "rps": 10, "burst":
// 10}, {"name": "api-key-day", "rps": 0.11574, "burst": 10000}], each a
// token bucket with its own name, rate and burst, which algorithm_config
// then leaves out (its cost fields stay, each at most the smallest burst).
// A limit with a "period" is a calendar quota instead: {"name":
// "api-key-month", "quota": 100000, "period": "month", "time_zone":
// "Europe/Berlin", "anchor": {"day": 15}, "anchor_from": {"day":
// "jwt:billing_day"}}, renewed whole when each period of the zone's
// calendar begins (Limit, engine.Calendar); a denial by it is reason
// quota_exceeded, with Retry-After at the renewal. A limit with a
// "window" is a strict window: {"name": "mail-day", "limit": 100,
// "window": "24h", "slots": 24} never admits more than 100 in any 24
// hours (engine.Window); its denial is reason window_exceeded.
// At most 8 limits; names of rules and limits are unique together. A
// request takes its cost from every limit of the rule or from none; each
// limit is one item of the header fields, one entry of Stats and of
// Result.Policies (Policy.Rule names its rule), and Result.DeniedBy names
// the limit that denied.
//
// Limit keys: "ip:address" (the client address, see Client address),
// "header:<name>", "query:<name>", "path", "method", "jwt:<claim>", "global"
// (one bucket for every request the rule applies to). Several keys make one
// bucket per combination. A request lacking a key (no such
// header) is limited under the empty value: all such requests share one
// bucket, so leaving a header out is never a way around a limit.
// "header:host" reads Request.Host (where Go's server keeps it) as a
// server name: lower case, without the port or a trailing dot.
//
// One value: a header or query parameter that a rule keys on, matches on or
// reads its cost from must have exactly one value, the one the application
// behind the limiter reads; otherwise the request is refused with 400,
// reason ambiguous_value, a problem document naming the header or
// parameter, and nothing taken. That is: a header sent on several lines; a
// comma in its value (a list, whose last item a framework may read), except
// for fields whose syntax has commas (User-Agent, Cookie, Authorization,
// Referer, the date and Accept fields, Cache-Control, Via and the forwarding
// fields); another spelling of its name (X_Api_Key, which CGI, WSGI and PHP
// read as X-Api-Key), even alone; a header the request names in Connection
// (a proxy drops it, so the application never sees the keyed value); a
// query parameter given twice (?k=a&k=b, %6B=b), in another case (K, which
// ASP.NET reads as k), in a spelling PHP folds into it (k.x, "k x" and
// k[x] for k_x, k[] and k%00x for k), or a query string with a ";" or a
// malformed %-escape anywhere (Go drops such pairs, other servers split or
// decode them). A rule that keys or matches on "method" refuses a request that
// asks for another method with X-HTTP-Method-Override, X-HTTP-Method,
// X-Method-Override or a _method query parameter (a _method in a form body
// is the application's to refuse), or with a lower-case letter in its method
// ("post", which Django and Flask serve as POST); for such a rule a HEAD is
// a GET (matched by "GET", keyed as GET), as most servers serve it. A request that no rule reads such a
// value of is unaffected, and a shadow rule only reports it
// (shadow_ambiguous_value). Commas in query values are values ("a,b").
//
// Match entries: "jwt:<claim>", "header:<name>", "query:<name>", "method",
// "path" (exact), "path_prefix" (string prefix: write "/api/" to exclude
// "/apix"). A value is a string or a list of strings (any of them); every
// entry must hold.
//
// Paths: the "path" key and the path matches read the request's path in
// canonical form (CanonicalPath under Options.Paths), decoded: "//api/x",
// "/./api/x", "/v/../api/x" and "/%61pi/x" are all "/api/x", as nginx and
// most frameworks read them, and Handler passes that form on. A path that
// has no canonical form (%00, a malformed escape, and by default %2F, %5C,
// "\" and ";") is answered 400 and takes no token; a match value that no
// canonical path can have is a configuration error.
//
// Which rules apply: rules with different limit_keys all apply, and a
// request must pass every one of them (per user, per tenant, global). Among
// rules with the same limit_keys (in any order) the first, in file order,
// whose match holds applies and the others are skipped: tiers. A rule that
// can never apply (after a rule with no match, or with the same match, in
// its group) is an error.
//
// The tokens of a request are taken from every applied enforce rule at once
// or from none (engine.Engine.TakeAllAt): a request denied by one rule costs the
// others nothing. Shadow rules take their tokens on their own after the
// decision (only when the request was allowed) and never deny; they show in
// Stats and Options.OnDeny, and in the header fields (their items, and the
// reason header as "shadow_..." when they would have denied) only with
// HeadersShadow: a client that honours the fields would back off for a
// rule that denies nothing.
//
// Cost: "fixed" charges fixed_cost. "header:<name>" and "query:<name>"
// charge the value sent, which must be a plain non-negative decimal ("3",
// "0.5"); none charges default_cost, and anything else ("+5", "5e1",
// "0x32", " 5", which other parsers read as numbers) is refused with 400,
// reason invalid_cost (and two values, ambiguous_value). The client chooses
// that value, so it is bounded: a value below min_cost (by
// default default_cost, so that a client never pays less than one that sends
// nothing) or above max_cost (by default none) is clamped to the bound, or,
// with cost_out_of_range "reject", answered 400 (reason invalid_cost) and
// nothing is taken. Costs are charged in steps of 0.001 token, rounded up.
// A cost above a rule's burst can never pass: 429 without Retry-After,
// reason cost_exceeds_burst. Every cost field is at least 0.001, a multiple
// of 0.001 and at most the burst.
//
// Validation (ParseRules, New, Reload) reports every problem at once, each
// naming the rule and the field: unknown fields, duplicate JSON keys, wrong
// types, both rps and tokens_per_second, a rate or burst out of range, a
// burst below the rate, costs that cannot be charged as written, cost
// bounds that contradict each other, unknown key kinds, duplicate names,
// rules that can never apply. New, Reload and Validate also reject rules
// that read JWT claims nobody verifies (see JWT claims).
//
// # JWT claims
//
// A "jwt:<claim>" key or match reads a claim of the bearer token of the
// Authorization header (at most 8 KiB), verified by Options.JWT (for
// instance github.com/faucetgo/faucet/jwtverify: HS256 secrets, JSON Web Key
// Sets, expiry, issuer, audience). The limiter takes its tokens before the
// application authenticates the request, so an unverified claim would let
// any client pick its tier or spend another tenant's bucket: without
// Options.JWT, New and Reload reject every rule that reads a claim, naming
// the field, unless the rule sets "insecure_unverified_jwt": true, which
// accepts claims decoded WITHOUT verification. With Options.JWT every rule
// gets verified claims, and the opt-in changes nothing.
//
// A token that fails verification (or cannot be decoded) counts as no token:
// jwt: keys are "" (all such requests share one bucket) and jwt: matches
// fail, so the request gets the rule's behaviour for requests without
// claims. Middleware.JWTStats counts such tokens by reason. A token is verified
// at most once per request, and only when a rule that applies needs a claim.
// A string claim compares as the string, any other as its JSON text (42,
// true; see Claims).
//
// # Responses
//
// Every checked response carries, for the enforce rules that applied (and
// the shadow ones with HeadersShadow):
//
//	RateLimit-Policy: "free";q=20;w=2
//	RateLimit: "free";r=17;t=0
//
// q is the burst, w the seconds an empty bucket takes to fill, r the whole
// tokens left, t the seconds until a request of the same cost could pass.
// HeadersLegacy and HeadersX add RateLimit-Limit/-Remaining/-Reset (and the
// X- forms) for the most constrained rule, Reset being the seconds until its
// bucket is full. A denied request gets 429, the reason header
// (X-Faucet-Reason: token_bucket_exceeded), an application/problem+json body
// (RFC 9457, type quota-exceeded, violated-policies) and
//
//	Retry-After: ceil(longest wait of any rule) + jitter
//
// The jitter is in [0, 50 %] of the wait, never negative (so Retry-After is
// never earlier than any t), and the same for one client of one rule every
// time (a hash of Options.JitterSeed, the rule and the bucket key): clients
// denied together come back spread out.
//
// # Client address
//
// The ip:address key is RemoteAddr's address unless RemoteAddr belongs to
// Options.TrustedProxies; then X-Forwarded-For (or Forwarded) is read right
// to left over all its lines, skipping trusted proxies, and the first
// untrusted hop is the client. A client's own X-Forwarded-For is therefore
// ignored. IPv6 clients are keyed by their /64 (Options.IPv6Prefix), so a
// client rotating addresses inside its network stays in one bucket.
//
// # In-flight limits
//
// A rule or limit with max_in_flight ("algorithm": "concurrency") counts
// the requests of each key between their admission and the end of their
// response: Handler holds a request's slot until next returns or panics,
// Admit until its done is called; Check only checks that one is free.
// Every request holds one slot, whatever its cost. A denial is a 429 with
// ReasonInFlightExceeded, whose Retry-After estimates when a slot frees:
// the mean time the rule's slots were held lately over max_in_flight, at
// least 1 s. On the memory store the counts are this process's; on an
// engine.SlotStore (Redis, PostgreSQL) the processes share them, each
// renewing the slots it holds, and fail_mode decides when the store fails
// ("fallback": this process's count, at its share of the limit). With
// Options.CheckOnly such rules are refused.
//
// # Delay mode
//
// A rule with delay reserves the tokens of a request its token buckets
// cannot cover now, if they are due within max_delay (and its key's
// queue), and the request waits until then instead of being denied
// (Result.Delay): Handler and Admit wait, Check returns the delay for its
// caller to wait. A request reserves from all of its rules or none, and
// one whose context ends while it waits gives its tokens back.
// Options.MaxWaiting bounds the requests waiting at once (ReasonDelayFull
// beyond it). Reservations are the in-memory engine's: on another store a
// rule in delay mode is refused when it binds.
//
// # Reload
//
// Middleware.Reload swaps the rules while requests are being checked, all or
// nothing. A rule that keeps its name and limit_keys keeps its buckets, even
// when its rate or burst changes, so a deploy gives no client a new burst;
// Middleware.Reload says what each kind of change keeps.
//
// # Store
//
// Buckets live in an engine.Store (default: NewMemoryStore, one engine per
// rule); package redisstore provides one in Redis, shared by instances. The
// Middleware binds an engine.Spec per rule on New and on every Reload, before
// the rules take effect: Spec.ID ("<name>#<16 hex digits>", a hash of the
// rule's limit_keys) names its buckets, so a rule that keeps its name and
// limit_keys keeps them. It releases the Specs a Reload drops and, on Close,
// all of them.
//
// A request's takes from the applied enforce rules are one TakeAll on their
// Limiters (engine.Limiter), at Options.Now when the Limiters are
// engine.TakerAt; each applied shadow rule's is one more, alone. An error
// from TakeAll means the store could not decide (Result.StoreError): each
// rule's fail_mode applies. "fallback", the default, keeps the decisions
// when the error wraps engine.ErrFallback (the store's in-memory fallback
// made them: RuleStats.Fallback) and answers 503 when it does not; "open"
// admits (RuleStats.FailedOpen); "closed" answers 503 with Retry-After: 1
// (RuleStats.FailedClosed). Any closed rule that applied makes the answer
// 503; an open rule's fallback bucket never denies the others. Stats reports bucket counts
// for Limiters that have a Stats method returning engine.Stats (the
// Engine), and a Reload retunes in place the Limiters that are
// engine.Retuner (see Middleware.Reload).
package httplimit
