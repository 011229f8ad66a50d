// Package pgdsn reads the PostgreSQL connection strings of serve's flags
// (--postgres, --rules-db, --audit-db) and opens pools on them. A DSN that
// holds a password is refused: credentials come from the environment.
package pgdsn
