package fuzz

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/envoyproxy/ratelimit/src/config"
	"github.com/envoyproxy/ratelimit/src/settings"
	"github.com/envoyproxy/ratelimit/src/stats"
	"github.com/faucetgo/faucet/grpclimit/envoyrls"
	gostats "github.com/lyft/gostats"
	yaml "gopkg.in/yaml.v2"
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
// loader: a file is accepted by one exactly when it is by the other. A
// file with faucet's calendar extension, which the reference refuses as an
// unknown key, is held to it without the extension (checkCalendars).
func FuzzRLSConfig(f *testing.F) {
	for _, seed := range rlsConfigSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.Contains(data, []byte("calendar")) {
			checkCalendars(t, data)
			return
		}
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

// checkCalendars checks a file that may hold faucet's calendar extension.
// Read and written back by the reference's YAML library, once as it is
// (with) and once with every calendar key removed (without), so that the
// two differ only by the extension:
//
//   - without is accepted by envoyrls exactly when by the reference;
//   - the extension only adds problems, each a calendar's (naming one):
//     every problem of without is one of with, and every other problem
//     of with names a calendar.
func checkCalendars(t *testing.T, data []byte) {
	with, without, ok := stripCalendars(data)
	if !ok {
		return // not a mapping, or not one yaml.v2 writes back
	}
	_, errWith := envoyrls.ParseDomain("f.yaml", with)
	d, errWithout := envoyrls.ParseDomain("f.yaml", without)
	if laterThanReference(without, errWithout) {
		return
	}
	ref, why := referenceAccepts(without)
	switch {
	case ref && errWithout != nil:
		t.Fatalf("without calendars, the reference accepts, envoyrls rejects: %v\n%s", errWithout, without)
	case !ref && errWithout == nil:
		t.Fatalf("without calendars, the reference rejects (%s), envoyrls accepts domain %q\n%s", why, d.Name, without)
	}
	pWith, pWithout := problems(t, errWith), problems(t, errWithout)
	for p := range pWithout {
		if !pWith[p] {
			t.Fatalf("a problem without calendars that the file with them lacks: %q\n%s", p, with)
		}
	}
	for p := range pWith {
		if !pWithout[p] && !strings.Contains(p, "calendar") {
			t.Fatalf("with calendars, a problem that is not a calendar's: %q\n%s", p, with)
		}
	}
}

// yamlLine is a line number in the YAML decoder's messages, at their
// start or within them ("not a YAML mapping: yaml: line 2: ..."), which
// removing a calendar's lines shifts.
var yamlLine = regexp.MustCompile(`line [0-9]+: `)

// problems is the set of problems of a ParseDomain error, without line
// numbers.
func problems(t *testing.T, err error) map[string]bool {
	out := map[string]bool{}
	if err == nil {
		return out
	}
	ce, ok := err.(*envoyrls.ConfigError)
	if !ok {
		t.Fatalf("%v, want a *ConfigError", err)
	}
	for _, p := range ce.Problems {
		out[yamlLine.ReplaceAllString(p, "")] = true
	}
	return out
}

// stripCalendars returns data decoded and encoded again by yaml.v2 (the
// reference's YAML library), as it is and with every "calendar" key of
// every mapping removed; ok is false if data is not a mapping it decodes
// and encodes.
func stripCalendars(data []byte) (with, without []byte, ok bool) {
	var root yaml.MapSlice
	if yaml.Unmarshal(data, &root) != nil {
		return nil, nil, false
	}
	with, err := yaml.Marshal(root)
	if err != nil {
		return nil, nil, false
	}
	without, err = yaml.Marshal(stripCalendar(root))
	if err != nil {
		return nil, nil, false
	}
	return with, without, true
}

func stripCalendar(v any) any {
	switch v := v.(type) {
	case yaml.MapSlice:
		out := make(yaml.MapSlice, 0, len(v))
		for _, it := range v {
			if it.Key != "calendar" {
				out = append(out, yaml.MapItem{Key: it.Key, Value: stripCalendar(it.Value)})
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = stripCalendar(e)
		}
		return out
	}
	return v
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
	// faucet's calendar extension, checked without it against the reference.
	"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: month\n      requests_per_unit: 1000\n      calendar: {time_zone: Europe/Berlin, day: 15, hour: 0}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: week, requests_per_unit: 5, calendar: {weekday: sunday}}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: year, requests_per_unit: 5, calendar: {month: 4, day: 6}}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: day, requests_per_unit: 5, calendar: {}}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 5, calendar: {}}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true, calendar: {}}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: month, requests_per_unit: 5, calendar: {time_zone: Nowhere, day: 32, hour: 24, minute: 1}}}\n",
	"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: month, requests_per_unit: 5, calendar: monthly}}\n",
	"domain: d\ndescriptors:\n  - {key: k, calendar: {}, rate_limit: {unit: day, requests_per_unit: 1}}\n",
	"domain: d\ncalendar: {}\n",
	"domain: ''\ndescriptors:\n  - {key: k, rate_limit: {unit: fortnight, requests_per_unit: 5, calendar: {day: 3}}}\n",
	"domain: d\ndescriptors:\n  - {key: k, value: calendar, rate_limit: {unit: day, requests_per_unit: 1}}\n",
}
