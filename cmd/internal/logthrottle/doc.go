// Package logthrottle keeps a run of errors from flooding the log: a
// Handler passes the first record of a class, then at most one per
// interval, and accounts for every record it held back.
package logthrottle
