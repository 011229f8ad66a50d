// Package rls serves Envoy's rate-limit service for faucet serve: the gRPC
// server with its health and reflection services, bounded per connection
// and in calls in flight, and its configuration, read from a directory
// of envoyproxy/ratelimit YAML files and reloaded through package reload.
package rls
