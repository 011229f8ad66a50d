package fuzz

import (
	"fmt"
	"strings"
	"testing"

	"github.com/envoyproxy/ratelimit/src/config"
	"github.com/envoyproxy/ratelimit/src/settings"
	"github.com/envoyproxy/ratelimit/src/stats"
	"github.com/faucetgo/faucet/grpclimit/envoyrls"
	gostats "github.com/lyft/gostats"
)

// referenceAccepts loads a configuration file with envoyproxy/ratelimit's
// own loader, which panics on a file it rejects.
func referenceAccepts(data []byte) (ok bool, why string) {
	defer func() {
		if r := recover(); r != nil {
			ok, why = false, fmt.Sprint(r)
		}
	}()
	root := config.ConfigFileContentToYaml("f.yaml", string(data))
	mgr := stats.NewStatManager(gostats.NewStore(gostats.NewNullSink(), false), settings.Settings{})
	config.NewRateLimitConfigImpl([]config.RateLimitConfigToLoad{{Name: "f.yaml", ConfigYaml: root}}, mgr, false)
	return true, ""
}

// laterThanReference reports inputs whose outcome changed in
// envoyproxy/ratelimit after the version the module proxy serves (the one
// required here): metadata blocks and wildcards before a value's end came
// later, and envoyrls follows the newer behaviour. A limit above a
// bucket's 1e9 tokens is refused by design.
func laterThanReference(data []byte, ourErr error) bool {
	s := string(data)
	if strings.Contains(s, "metadata") || strings.Contains(s, "*") {
		return true
	}
	return ourErr != nil && strings.Contains(ourErr.Error(), "Burst must be between 1 and 1e9")
}

// FuzzRLSConfig checks envoyrls.ParseDomain against the reference server's
// loader: a file is accepted by one exactly when it is by the other.
func FuzzRLSConfig(f *testing.F) {
	for _, seed := range rlsConfigSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := envoyrls.ParseDomain("f.yaml", data)
		if laterThanReference(data, err) {
			return
		}
		ref, why := referenceAccepts(data)
		switch {
		case ref && err != nil:
			t.Fatalf("the reference accepts, envoyrls rejects: %v\n%s", err, data)
		case !ref && err == nil:
			t.Fatalf("the reference rejects (%s), envoyrls accepts domain %q\n%s", why, d.Name, data)
		}
	})
}

// rlsConfigSeeds are configurations each side accepts or rejects for a
// reason of its own: every rule of the format.
var rlsConfigSeeds = []string{
	"domain: d\n",
	"",
	"domain: ''\n",
	"descriptors: []\n",
	"- domain: d\n",
	"domain: [\n",
	"domain: {a: b}\n",
	"domain: d\nlimits: 3\n",
	"domain: d\nunit: second\n",
	"domain: d\n1: x\n",
	"domain: d\ndescriptors: {key: k}\n",
	"domain: d\ndescriptors: [a, b]\n",
	"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n",
	"domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: SECOND, requests_per_unit: 1}}\n  - {key: b, rate_limit: {unit: Minute, requests_per_unit: 1}}\n  - {key: c, rate_limit: {unit: week, requests_per_unit: 1}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: fortnight, requests_per_unit: 1}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: unknown, requests_per_unit: 1}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {requests_per_unit: 1}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true, unit: second}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true, unit: fortnight}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: -1}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 4294967295}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 4294967296}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 2.5}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: '10'}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 0x10}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: null}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: [1]}\n",
	"domain: d\ndescriptors:\n  - {key: k, value: 42}\n",
	"domain: d\ndescriptors:\n  - {key: k, value: 1.5}\n",
	"domain: d\ndescriptors:\n  - {key: k, value: yes}\n",
	"domain: d\ndescriptors:\n  - {key: k, value: ''}\n",
	"domain: d\ndescriptors:\n  - {value: v}\n",
	"domain: d\ndescriptors:\n  - {key: k, value: v}\n  - {key: k, value: v}\n",
	"domain: d\ndescriptors:\n  - {key: a, value: b}\n  - {key: a_b}\n",
	"domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - {key: x}\n      - {key: x}\n",
	"domain: d\ndescriptors:\n  - {key: k, shadow_mode: yes, quota_mode: off, detailed_metric: true, value_to_metric: false}\n",
	"domain: d\ndescriptors:\n  - {key: k, shadow_mode: 'true'}\n",
	"domain: d\ndescriptors:\n  - {key: k, shadow_mode: 1}\n",
	"domain: d\ndescriptors:\n  - {key: k, value: v, share_threshold: true}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: b}]}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, replaces: {name: x}}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, replaces: [x]}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, burst: 2}}\n",
	"domain: d\ndescriptors:\n  - {key: k, requests_per_unit: 3}\n",
	"# comment\ndomain: d # trailing\n",
	"domain: 12\n",
	"domain: true\n",
	"domain: d\ndomain: e\n",
}
