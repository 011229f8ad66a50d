// Package metrics exports serve's Prometheus metrics: the limiter's and
// the rate-limit service's counters, read at scrape time so that requests
// pay nothing for them, and serve's own.
package metrics
