// Package pgstore is a token-bucket rate limiter whose buckets live in
// PostgreSQL, so that every instance of a service that shares a database
// enforces one limit together.
package pgstore
