// Package stores opens the bucket store faucet serve runs on: in memory,
// in Redis, or in PostgreSQL with its pool readied before the first
// check. Every store option of serve is decided here.
package stores
