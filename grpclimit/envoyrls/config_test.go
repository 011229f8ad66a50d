package envoyrls

import (
	"errors"
	"strings"
	"testing"
)

// Files the reference loads load here, with the same limits.
func TestParseDomainAccepts(t *testing.T) {
	for name, src := range map[string]string{
		"minimal":                   "domain: d\n",
		"no value":                  "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n",
		"units":                     "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: SECOND, requests_per_unit: 1}}\n  - {key: b, rate_limit: {unit: Minute, requests_per_unit: 1}}\n  - {key: c, rate_limit: {unit: hour, requests_per_unit: 1}}\n  - {key: e, rate_limit: {unit: day, requests_per_unit: 1}}\n  - {key: f, rate_limit: {unit: week, requests_per_unit: 1}}\n  - {key: g, rate_limit: {unit: month, requests_per_unit: 1}}\n  - {key: h, rate_limit: {unit: year, requests_per_unit: 1}}\n",
		"zero":                      "domain: d\ndescriptors:\n  - {key: k, value: v, rate_limit: {unit: second, requests_per_unit: 0}}\n",
		"missing rpu":               "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second}}\n",
		"unlimited":                 "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true}}\n",
		"unlimited with a bad unit": "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true, unit: fortnight}}\n",
		"integer value":             "domain: d\ndescriptors:\n  - {key: k, value: 42, rate_limit: {unit: second, requests_per_unit: 1}}\n",
		"empty value is no value":   "domain: d\ndescriptors:\n  - {key: k, value: '', rate_limit: {unit: second, requests_per_unit: 1}}\n",
		"flags and metadata":        "domain: d\ndescriptors:\n  - key: k\n    value: 'p*'\n    shadow_mode: yes\n    quota_mode: false\n    detailed_metric: true\n    value_to_metric: true\n    share_threshold: true\n    metadata: {team: x, weight: 1.5, tags: [a, b]}\n    rate_limit: {unit: second, requests_per_unit: 1, name: n, replaces: [{name: m}]}\n",
		"null rate_limit":           "domain: d\ndescriptors:\n  - {key: k, rate_limit: null}\n",
		"misplaced known key":       "domain: d\nunit: second\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n",
		"comments":                  "# limits\ndomain: d # the domain\n",
	} {
		t.Run(name, func(t *testing.T) {
			d, err := ParseDomain(name+".yaml", []byte(src))
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if d.Name != "d" {
				t.Errorf("domain %q, want d", d.Name)
			}
		})
	}
}

func TestParseDomainWarnsOfIgnoredKeys(t *testing.T) {
	d, err := ParseDomain("f.yaml", []byte("domain: d\nunit: second\ndescriptors:\n  - {key: k, requests_per_unit: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"unit: has no effect here", "descriptors[0].requests_per_unit: has no effect here"}
	for _, w := range want {
		if !strings.Contains(strings.Join(d.Warnings, "\n"), w) {
			t.Errorf("warnings %q lack %q", d.Warnings, w)
		}
	}
}

// Files the reference rejects are rejected, each problem named.
func TestParseDomainRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		src  string
		want []string
	}{
		"not yaml":            {"domain: [", []string{"not a YAML mapping"}},
		"a list":              {"- domain: d\n", []string{"not a YAML mapping"}},
		"empty":               {"", []string{"domain: missing or empty"}},
		"missing domain":      {"descriptors: []\n", []string{"domain: missing or empty"}},
		"unknown key":         {"domain: d\nlimits: 3\n", []string{"limits: unknown key"}},
		"nested unknown":      {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, burst: 2}}\n", []string{"descriptors[0].rate_limit.burst: unknown key"}},
		"unknown unit":        {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: fortnight, requests_per_unit: 1}}\n", []string{`descriptors[0].rate_limit.unit: "fortnight" is not one of`}},
		"missing unit":        {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {requests_per_unit: 1}}\n", []string{`descriptors[0].rate_limit.unit: "" is not one of`}},
		"unknown as unit":     {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: unknown, requests_per_unit: 1}}\n", []string{`"unknown" is not one of`}},
		"unlimited unit":      {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true, unit: second}}\n", []string{"an unlimited rate_limit takes no unit"}},
		"empty key":           {"domain: d\ndescriptors:\n  - {value: v}\n", []string{"descriptors[0].key: missing or empty"}},
		"duplicate":           {"domain: d\ndescriptors:\n  - {key: k, value: v}\n  - {key: k, value: v}\n", []string{`descriptors[1]: duplicate descriptor "d.k_v"`}},
		"duplicate composite": {"domain: d\ndescriptors:\n  - {key: a, value: b}\n  - {key: a_b}\n", []string{`descriptors[1]: duplicate descriptor "d.a_b"`}},
		"nested duplicate":    {"domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - {key: x}\n      - {key: x}\n", []string{`descriptors[0].descriptors[1]: duplicate descriptor "d.k.x"`}},
		"empty replaces":      {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}}\n", []string{"replaces[0].name: missing or empty"}},
		"self replaces":       {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}}\n", []string{`replaces[0].name: "a" is this limit's own name`}},
		"share without *":     {"domain: d\ndescriptors:\n  - {key: k, value: v, share_threshold: true}\n", []string{"share_threshold: needs a wildcard"}},
		"float leaf":          {"domain: d\ndescriptors:\n  - {key: k, value: 1.5}\n", []string{"descriptors[0].value: 1.5 is not a string, an integer or a boolean"}},
		"float rpu":           {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 2.5}}\n", []string{"requests_per_unit: 2.5 is not"}},
		"negative rpu":        {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: -1}}\n", []string{"cannot unmarshal !!int `-1` into an integer from 0 to 4294967295 (requests_per_unit)"}},
		"rpu above uint32":    {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 4294967296}}\n", []string{"into an integer from 0 to 4294967295"}},
		"quoted rpu":          {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: '10'}}\n", []string{"into an integer from 0 to 4294967295"}},
		"quoted bool":         {"domain: d\ndescriptors:\n  - {key: k, shadow_mode: 'true'}\n", []string{"into a boolean"}},
		"scalar list":         {"domain: d\ndescriptors: [a, b]\n", []string{"descriptors[0]: a list may hold only mappings", "descriptors[1]: a list may hold only mappings"}},
		"descriptors map":     {"domain: d\ndescriptors: {key: k}\n", []string{"line 2: cannot unmarshal !!map into a list of descriptors"}},
		"non-string key":      {"domain: d\n1: x\n", []string{"key 1: not a string"}},
		"metadata list":       {"domain: d\ndescriptors:\n  - {key: k, metadata: [a]}\n", []string{"cannot unmarshal !!seq into a mapping (metadata)"}},
		// The reference takes up to 2^32-1 a unit; a bucket holds at most 1e9.
		"above a bucket": {"domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: hour, requests_per_unit: 2000000000}}\n", []string{"descriptors[0].rate_limit: requests_per_unit 2000000000 per HOUR", "Burst must be between 1 and 1e9 tokens"}},
		"every problem": {"domain: ''\nbogus: 1\ndescriptors:\n  - {key: '', value: v}\n  - {key: k, rate_limit: {unit: eon, requests_per_unit: 1}}\n  - {key: k, rate_limit: {unit: eon, requests_per_unit: 1}}\n",
			[]string{"bogus: unknown key", "domain: missing or empty", "descriptors[0].key: missing or empty", `descriptors[1].rate_limit.unit: "eon"`, "descriptors[2]: duplicate descriptor"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseDomain(name+".yaml", []byte(tc.src))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want a *ConfigError", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, name+".yaml") {
				t.Errorf("%q does not name the file", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestParseDomainBoundsTheFile(t *testing.T) {
	big := "domain: d\n# " + strings.Repeat("x", MaxConfigBytes) + "\n"
	_, err := ParseDomain("big.yaml", []byte(big))
	if err == nil || !strings.Contains(err.Error(), "above the 4194304 a configuration may hold") {
		t.Fatalf("err %v, want the size bound named", err)
	}
}

func TestNewConfigRejectsADomainTwice(t *testing.T) {
	a, _ := ParseDomain("a.yaml", []byte("domain: d\n"))
	b, _ := ParseDomain("b.yaml", []byte("domain: d\n"))
	_, err := NewConfig(a, b)
	if err == nil || !strings.Contains(err.Error(), `b.yaml: domain "d" is already defined by a.yaml`) {
		t.Fatalf("err %v", err)
	}
}

func TestWildMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"k_value*", "k_value1", true}, {"k_value*", "k_value", true}, {"k_value*", "k_valu", false},
		{"path_/api/*/action", "path_/api/123/action", true}, {"path_/api/*/action", "path_/api/123/other", false},
		{"path_/api/*/action", "path_/api/action", false}, {"path_/api/*/action", "path_/api//action", true},
		{"r_/api/*/resource/*/action", "r_/api/v1/resource/9/action", true},
		{"r_/api/*/resource/*/action", "r_/api/v1/resource/action", false},
		{"k_a*a", "k_a", false}, {"k_a*a", "k_aa", true}, {"k_*", "k_", true},
	} {
		if got := wildMatch(strings.Split(tc.pattern, "*"), tc.s); got != tc.want {
			t.Errorf("wildMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
