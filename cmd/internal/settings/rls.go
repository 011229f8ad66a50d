package settings

import (
	"flag"
	"fmt"
)

// RLS are serve's flags for Envoy's rate-limit service.
type RLS struct {
	Listen        string
	Config        string
	Headers       bool
	ShadowHeaders bool
	Shadow        bool
	MaxStreams    int
	MaxCalls      int
}

const (
	defaultRLSMaxStreams = 100
	defaultRLSMaxCalls   = 10_000
	maxRLSStreams        = 10_000
	maxRLSCalls          = 1_000_000
)

func (f *RLS) register(fs *flag.FlagSet) {
	fs.StringVar(&f.Listen, "rls", "", "also serve Envoy's rate-limit service (gRPC envoy.service.ratelimit.v3, with the standard health service) on `ADDR`ess")
	fs.StringVar(&f.Config, "rls-config", "", "`DIR` of the rate-limit service's configuration: every *.yaml file in it, one domain each, in envoyproxy/ratelimit's format")
	fs.BoolVar(&f.Headers, "rls-headers", false, "add the RateLimit-Policy and RateLimit fields (and Retry-After on a denial) to the rate-limit service's answers, for Envoy to send on")
	fs.BoolVar(&f.ShadowHeaders, "rls-shadow-headers", false, "with --rls-headers, list shadow_mode descriptors in those fields too (by default they report in the metrics only)")
	fs.BoolVar(&f.Shadow, "rls-shadow", false, "answer OK to every rate-limit service request, still counting what would have been denied")
	fs.IntVar(&f.MaxStreams, "rls-max-streams", defaultRLSMaxStreams, "most calls in flight on one rate-limit service connection (HTTP/2 streams; 1 to 10000): more are refused (REFUSED_STREAM)")
	fs.IntVar(&f.MaxCalls, "rls-max-calls", defaultRLSMaxCalls, "most rate-limit service calls in flight over all connections (1 to 1000000): more are answered RESOURCE_EXHAUSTED")
}

// problems lists what is wrong with the rate-limit service flags.
func (f *RLS) problems() []string {
	var problems []string
	if f.MaxStreams < 1 || f.MaxStreams > maxRLSStreams {
		problems = append(problems, fmt.Sprintf("--rls-max-streams: must be from 1 to %d, got %d", maxRLSStreams, f.MaxStreams))
	}
	if f.MaxCalls < 1 || f.MaxCalls > maxRLSCalls {
		problems = append(problems, fmt.Sprintf("--rls-max-calls: must be from 1 to %d, got %d", maxRLSCalls, f.MaxCalls))
	}
	switch {
	case f.Listen != "" && f.Config == "":
		problems = append(problems, "--rls: needs --rls-config DIR")
	case f.Listen == "" && (f.Config != "" || f.Headers || f.Shadow || f.MaxStreams != defaultRLSMaxStreams || f.MaxCalls != defaultRLSMaxCalls):
		problems = append(problems, "--rls-config, --rls-headers, --rls-shadow, --rls-max-streams, --rls-max-calls: only mean something with --rls")
	}
	if f.ShadowHeaders && !f.Headers {
		problems = append(problems, "--rls-shadow-headers: only means something with --rls-headers")
	}
	return problems
}
