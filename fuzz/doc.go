// Package fuzz proves faucet's guarantees: native Go fuzz targets that drive
// the public API with hostile clocks and costs against an exact reference
// model, and the concurrency, eviction and linearizability tests that back
// docs/guarantees.md, and FuzzRLSConfig, which holds
// the Envoy rate-limit service's configuration parser to the reference
// server's own loader (envoyproxy/ratelimit, required here as a module).
// It has no code outside its tests
// and is its own module, so that test-only dependencies stay out of the
// root go.mod.
package fuzz
