// Package rulesdb reads faucet serve's HTTP rules from a PostgreSQL table
// (--rules-db) and keeps them up to date: the table's trigger notifies
// each change, a poll finds any missed, and package reload applies and
// reports each reading.
package rulesdb
