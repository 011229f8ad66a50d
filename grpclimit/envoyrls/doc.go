// Package envoyrls is a rate-limit service for Envoy: it implements
// envoy.service.ratelimit.v3.RateLimitService, which Envoy's global
// rate-limit filter (and Istio, Envoy Gateway) calls, over faucet's token
// buckets.
//
// The configuration is envoyproxy/ratelimit's YAML, read as that project
// reads it: a domain per file, nested descriptors with key and optional
// value (a value holding '*' matches as a wildcard), rate_limit with unit
// and requests_per_unit, unlimited, name and replaces, shadow_mode,
// quota_mode, detailed_metric, value_to_metric, share_threshold and
// metadata. ParseDomain accepts the files that project accepts and rejects
// the ones it rejects, naming every problem; NewConfig joins the domains.
//
// # Token buckets instead of fixed windows
//
// Each matched descriptor is a bucket of requests_per_unit tokens that
// refills requests_per_unit per unit, continuously: a rolling window. A
// fixed window aligned to the clock admits up to twice its limit around a
// boundary (the end of one window and the start of the next) and then
// nothing until the next boundary; a bucket admits at most its burst at
// once and then requests spaced by the refill, at any moment. The other
// differences:
//
//   - A request is admitted only if every matched bucket holds its cost,
//     and then all of them are taken from; a denial takes nothing, where
//     the reference counts the request in every window, so that a client
//     denied by one limit does not use up another.
//   - duration_until_reset is, on OK, the time until the bucket is full
//     again and, on OVER_LIMIT, the time until the request's cost is
//     there (absent when it never will be: a cost above the burst).
//   - A descriptor's hits_addend of 0 takes nothing, and is OVER_LIMIT
//     when a cost of 1 would be (the reference answers OK until its
//     window's count has passed the limit).
//   - A limit carried by the request (the descriptor's limit field, its
//     unit_multiplier honoured) has buckets of its own, apart from the
//     configured limit's; their number is bounded, per domain
//     (Options.MaxOverrides), and one that finds no room is OVER_LIMIT.
//   - A shadow_mode or quota_mode limit that cannot cover the cost is
//     reported and set aside, and takes nothing; the request is denied
//     when an enforced limit cannot cover it or when every quota_mode
//     limit that matched is exhausted, as in the reference.
//   - requests_per_unit is at most 1e9 (a bucket's bound); the reference
//     takes up to 2^32-1.
//
// # Calendar quotas
//
// A rate_limit of unit day, week, month or year may carry a calendar,
// faucet's extension of the format (the reference server refuses a file
// with one): then its limit is a calendar quota (engine.Quota) of
// requests_per_unit per calendar day, week, month or year of a time zone,
// renewed at once at an anchor, in place of a bucket:
//
//	rate_limit:
//	  unit: month
//	  requests_per_unit: 1000
//	  calendar: {time_zone: Europe/Berlin, day: 15, hour: 0}
//
// Its fields are time_zone (an IANA name; UTC by default), month (1 to
// 12, a year's first), day (1 to 31, a month's or year's first), weekday
// ("monday" to "sunday", a week's first) and hour (0 to 23), each the
// first of its range by default. Its descriptor status reports what is
// left in the period, and duration_until_reset the time until it renews.
// A request-carried limit on its descriptor is a bucket, as any.
//
// Buckets live in an engine.Store: in memory by default, or shared by many
// instances through redisstore (per check or leased).
package envoyrls
