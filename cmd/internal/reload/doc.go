// Package reload keeps a configuration in force up to date with where it
// is kept: the rules file, the rate-limit service's directory, the rules
// table.
//
// A Reloader reads its Source when asked (a tick, a SIGHUP), compares the
// digest of what it read with that of the configuration in force, and
// parses and applies only a change. What fails is reported once: a read
// error until it changes or is gone, a configuration that does not parse
// or apply until its content changes. A forced check (SIGHUP) parses and
// applies, or reports, whatever it finds. The configuration in force stays
// until a new one applies, so what it keeps across reloads (the buckets of
// unchanged rules) is kept.
//
// A source that watches itself (the rules table, notified of its changes
// by PostgreSQL) is a Watched source: it delivers each reading that
// differs from the one before, and the Reloader applies and reports it
// as it would its own.
package reload
