// Package audit records faucet serve's denials in PostgreSQL (--audit-db):
// a pgaudit Writer on a pool of its own, whose counts the metrics export.
package audit
