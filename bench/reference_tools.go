//go:build tools

package bench

// BenchmarkRLS builds envoyproxy/ratelimit's server from this module's
// requirements; this import keeps them (go mod tidy reads every build tag)
// without linking the server into any test binary.
import _ "github.com/envoyproxy/ratelimit/src/service_cmd/runner"
