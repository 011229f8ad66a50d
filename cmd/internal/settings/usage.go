package settings

// Usage is the help of faucet serve, which the flags' defaults follow.
const Usage = `usage: faucet serve [--rules FILE] [--upstream URL] [--listen ADDR] [flags]

Enforces the rules of FILE (default: one rule, 5 requests per second per
client address, bursts of 10) on HTTP requests:
  with --upstream, as a reverse proxy in front of URL;
  without it, as a check API: POST /v1/check with a JSON description of a
  request gets the decision and the headers to send.
GET /healthz answers "ok" (never limited, never proxied). Prometheus metrics
are served on a separate admin listener (--admin-listen, loopback by default)
with its own /healthz, never on the public one: there a request for
/metrics is proxied like any other with --upstream, and 404 without. SIGHUP,
or a change to FILE, reloads the rules; buckets of unchanged rules are kept.
Rules read a request's path in one canonical form, which the upstream is
sent too: unreserved escapes decoded once, slashes merged, dot segments
removed; a path that has none (%00, a bad escape, %2F, %5C, \, ;) gets 400,
and so does a request with several values for a header or query parameter
a rule reads. The proxy opens no tunnel it was not told to: CONNECT gets
405, an h2c upgrade is proxied as plain HTTP/1.1, and any other upgrade
gets 403 unless --upgrade names it; an allowed tunnel takes one request's
tokens and is bounded by --upgrade-max-duration, --upgrade-idle-timeout and
--upgrade-max-bytes.
SIGINT or SIGTERM shuts down gracefully. A bad rules file is reported in full
and exits with status 2. Logs go to stderr; an error that repeats (a store
that is down, an upstream that fails) is logged once, then at most once
every 10 s with the number of repeats left out.

No client holds a connection for long: a request's header must arrive
within --read-header-timeout, the whole request within --read-timeout, its
response within --write-timeout; a keep-alive connection closes after
--idle-timeout without a request. At --max-conns connections a new client
takes the place of one that is idle; no request in flight is dropped, and
a client that finds no place gets 503. An upstream that does not answer within
--upstream-timeout gets 504, any other upstream failure 502, each with an
application/problem+json body.

Buckets live in this process unless --redis names a Redis server (or the
seeds of a Redis Cluster): then every instance started with the same --redis,
--redis-prefix and rules shares each rule's buckets, and together they admit
what one instance would. The password, if any, is read from the environment
variable FAUCET_REDIS_PASSWORD (and an ACL user name from FAUCET_REDIS_USERNAME),
never from the command line. When Redis fails or answers later than
--redis-timeout, an in-memory bucket per key decides at 1/N of each rule's
limit, N the instances that recorded a heartbeat in Redis within the last
5 s (--redis-fallback-share fixes the share); a rule's fail_mode "open"
admits instead, "closed" answers 503.

--postgres DSN keeps the buckets in a PostgreSQL table instead, with the same
sharing and failure behaviour (--postgres-timeout); the password comes from
PGPASSWORD or a password file, and a DSN holding one is refused.
--postgres-install creates the table (UNLOGGED unless --postgres-logged) and
its functions; without it they must exist. Rows of buckets that are full
again are removed every --postgres-sweep.

Rules that read JWT claims (jwt: keys and matches) need the tokens verified:
with the keys of a JSON Web Key Set (--jwt-jwks-file or --jwt-jwks-url: RS256,
ES256, EdDSA) or an HS256 secret read from the environment variable
FAUCET_JWT_SECRET (at least 32 bytes), never from the command line. A token
that fails verification counts as none. Without verification such rules are
refused, unless they set "insecure_unverified_jwt": true (warned about).
--validate checks the rules against these settings, loading the key set.

With --rls ADDR, faucet also serves Envoy's rate-limit service there
(gRPC envoy.service.ratelimit.v3.RateLimitService, the standard gRPC health
service, and server reflection), configured by every *.yaml file of
--rls-config DIR in envoyproxy/ratelimit's format, one domain per file. Each
matched descriptor is a token bucket of requests_per_unit refilling
requests_per_unit per unit, in the same store as the rules (--redis shares
them). A change to a file in DIR (checked every --watch) or SIGHUP reloads
them; buckets of unchanged limits are kept. --validate checks DIR too.
With --listen "" it runs alone: no HTTP rule is loaded.

With --audit-db DSN, every denial (and every request a shadow rule would
have denied, flagged) becomes a row of --audit-table in PostgreSQL, which
must exist (--audit-install creates it). Rows are written in batches by one COPY each,
from a queue of --audit-queue denials: no request waits for the database.
When the queue is full, because the database is slow or away, denials are
dropped and counted (faucet_audit_dropped_total); when it is back, what the
queue held is written. Shutdown writes the queue within --shutdown-timeout.
The DSN must hold no password: it comes from PGPASSWORD or a password file.

With --rules-db DSN instead of --rules, the rules are the active rows of a
PostgreSQL table (--rules-db-table, created if missing with its trigger by
--rules-db-install): key_pattern ip:{name} keys by client address,
user:{name} by --rules-db-user-key, endpoint:/path limits that path as one
bucket, global everything as one; a row's plan is a tier matched against
--rules-db-plan-key, a NULL plan applies to every plan without a row of its
own. Rows sharing a key_pattern and plan are one rule, a limit each (a row
with quota_period is a calendar quota of burst_capacity tokens a period). A change is in force as soon as the trigger's notification arrives,
or within --rules-db-poll; buckets of unchanged rows are kept. A bad row is
logged by rule_id with every problem and left out, the others apply. An
unreachable database stops serve from starting; later, the rules in force
stay until it is back. --validate reports every bad row.

Unless GOGC is set in the environment, the garbage collector lets the heap
grow to 16 MiB, or twice what is live if that is more, before it collects:
Go's default floor of 4 MiB would have it run every few hundred requests.

flags:
`
