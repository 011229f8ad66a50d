package envoyrls

import (
	"errors"
	"fmt"
	"strings"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/faucetgo/faucet/engine"
	yaml "go.yaml.in/yaml/v2"
)

// Config is a set of domains, each from one file in envoyproxy/ratelimit's
// YAML format. It is immutable once built.
type Config struct {
	domains map[string]*Domain
}

// Domain is one configuration file: a domain and its descriptor tree.
type Domain struct {
	// Name is the domain.
	Name string
	// File is the name the configuration was parsed under.
	File string
	// Warnings lists keys the reference server accepts but ignores where
	// they stand (such as a unit at the top level): the file loads, and
	// they have no effect.
	Warnings []string
	root     node
	limits   []*Limit
}

// Limit is a descriptor's rate_limit block.
type Limit struct {
	// Name is the limit's name, which other limits' replaces lists refer to.
	Name string
	// Unit and RequestsPerUnit are the limit: a bucket of RequestsPerUnit
	// tokens that refills RequestsPerUnit every Unit (or, with Calendar,
	// a quota of RequestsPerUnit per calendar Unit). An unlimited limit
	// has no bucket.
	Unit            pb.RateLimitResponse_RateLimit_Unit
	RequestsPerUnit uint32
	Unlimited       bool
	// Replaces names the limits this one replaces when both match.
	Replaces []string
	// Shadow reports shadow_mode: a denial is counted, never enforced.
	Shadow bool
	// Quota reports quota_mode: the request is denied only when every
	// quota-mode limit that matched is exhausted.
	Quota bool
	// Detailed reports detailed_metric: metrics name each request value.
	Detailed bool
	// Calendar, set by the rate_limit's calendar (faucet's extension of
	// the format), makes the limit a calendar quota: RequestsPerUnit per
	// period of Calendar (a day, week, month or year, as Unit), renewed at
	// once when the next begins, in place of a bucket.
	Calendar *engine.Calendar
	// Path is the limit's place in the tree, "domain.key_value.key...",
	// the name its metrics carry.
	Path string
	// id names the limit's buckets in the store.
	id string
	// levels is Path's levels, the domain apart: the composite keys on
	// the way.
	levels metricKey
	// valuesInMetric is set when a descriptor on the limit's path has
	// value_to_metric: its metrics may name request values.
	valuesInMetric bool
}

// node is one level of a domain's descriptor tree. Like the reference,
// it indexes children by their composite key: "key" without a value,
// "key_value" with one.
type node struct {
	// composite is the descriptor's composite key.
	composite string
	children  map[string]*node
	// wild lists the children whose composite key holds a '*', in file
	// order: a request entry that matches no child exactly is matched
	// against them, first match wins.
	wild          []wildChild
	limit         *Limit
	valueToMetric bool
	// shared is the value pattern all matches of a share_threshold
	// wildcard count under, "" if the node does not share.
	shared string
}

type wildChild struct {
	parts []string
	n     *node
}

// ConfigError lists every problem of a configuration file.
type ConfigError struct {
	File     string
	Problems []string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("envoyrls: %s: %s", e.File, strings.Join(e.Problems, "; "))
}

// The file's structure, as the reference reads it (gopkg.in/yaml.v2
// decoding into typed fields: a scalar decodes into a string field as its
// text, a uint32 takes 0 to 2^32-1, a bool takes YAML 1.1 booleans only).
type fileRoot struct {
	Domain      string           `yaml:"domain"`
	Descriptors []fileDescriptor `yaml:"descriptors"`
}

type fileDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value"`
	RateLimit      *fileRateLimit   `yaml:"rate_limit"`
	Descriptors    []fileDescriptor `yaml:"descriptors"`
	ShadowMode     bool             `yaml:"shadow_mode"`
	QuotaMode      bool             `yaml:"quota_mode"`
	DetailedMetric bool             `yaml:"detailed_metric"`
	ValueToMetric  bool             `yaml:"value_to_metric"`
	ShareThreshold bool             `yaml:"share_threshold"`
	Metadata       map[string]any   `yaml:"metadata"`
}

type fileRateLimit struct {
	RequestsPerUnit uint32 `yaml:"requests_per_unit"`
	Unit            string `yaml:"unit"`
	Unlimited       bool   `yaml:"unlimited"`
	Name            string `yaml:"name"`
	Replaces        []struct {
		Name string `yaml:"name"`
	} `yaml:"replaces"`
	Calendar fileCalendar `yaml:"calendar"`
}

// yamlTypes names the file's types in the decoder's messages as a
// configuration's author knows them.
var yamlTypes = strings.NewReplacer(
	" into []envoyrls.fileDescriptor", " into a list of descriptors",
	" into envoyrls.fileRateLimit", " into a rate_limit mapping",
	" into map[string]interface {}", " into a mapping (metadata)",
	" into envoyrls.fileCalendar", " into a mapping (calendar)",
	" into []struct { Name string \"yaml:\\\"name\\\"\" }", " into a list of {name: ...} (replaces)",
	" into struct { Name string \"yaml:\\\"name\\\"\" }", " into a {name: ...} mapping",
	" into uint32", " into an integer from 0 to 4294967295 (requests_per_unit)",
	" into bool", " into a boolean",
	" into string", " into a string",
)

// knownKeys are the keys a configuration may use, at any level: the
// reference checks the set, not where each key stands.
var knownKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
	"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true,
	"quota_mode": true, "name": true, "replaces": true, "detailed_metric": true,
	"value_to_metric": true, "share_threshold": true, "metadata": true,
}

// where each key takes effect; elsewhere it is accepted and ignored.
var (
	rootKeys       = map[string]bool{"domain": true, "descriptors": true}
	descriptorKeys = map[string]bool{"key": true, "value": true, "rate_limit": true, "descriptors": true,
		"shadow_mode": true, "quota_mode": true, "detailed_metric": true, "value_to_metric": true,
		"share_threshold": true, "metadata": true}
	rateLimitKeys = map[string]bool{"requests_per_unit": true, "unit": true, "unlimited": true, "name": true, "replaces": true,
		calendarKey: true}
	replacesKeys = map[string]bool{"name": true}
)

// MaxConfigBytes bounds a configuration file.
const MaxConfigBytes = 4 << 20

// ParseDomain parses one configuration file: it accepts what
// envoyproxy/ratelimit accepts, and rejects what it rejects with every
// problem named. file names the configuration in errors.
func ParseDomain(file string, data []byte) (*Domain, error) {
	if len(data) > MaxConfigBytes {
		return nil, &ConfigError{File: file, Problems: []string{fmt.Sprintf("%d bytes, above the %d a configuration may hold", len(data), MaxConfigBytes)}}
	}
	ce := &ConfigError{File: file}
	var generic map[any]any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		ce.Problems = append(ce.Problems, "not a YAML mapping: "+err.Error())
		return nil, ce
	}
	d := &Domain{File: file}
	checkKeys(ce, d, "", generic, rootKeys)
	var root fileRoot
	if err := yaml.Unmarshal(data, &root); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, e := range te.Errors {
				ce.Problems = append(ce.Problems, yamlTypes.Replace(e))
			}
		} else {
			ce.Problems = append(ce.Problems, err.Error())
		}
	}
	d.Name = root.Domain
	if root.Domain == "" {
		ce.Problems = append(ce.Problems, "domain: missing or empty")
	}
	d.root.children = map[string]*node{}
	d.load(ce, &d.root, "", root.Domain+".", nil, false, root.Descriptors)
	if len(ce.Problems) > 0 {
		return nil, ce
	}
	return d, nil
}

// checkKeys checks a mapping's keys and leaves as the reference does:
// every key a known one, every list a list of mappings, every leaf a
// string, an integer that fits an int, a bool or null. Known keys out of
// place become warnings.
func checkKeys(ce *ConfigError, d *Domain, path string, m map[any]any, here map[string]bool) {
	for k, v := range m {
		name, ok := k.(string)
		if !ok {
			ce.Problems = append(ce.Problems, fmt.Sprintf("%skey %v: not a string", at(path), k))
			continue
		}
		p := join(path, name)
		if name == calendarKey {
			// faucet's own key, only where it takes effect; its fields are
			// read with the limit.
			if !here[name] {
				ce.Problems = append(ce.Problems, p+": a calendar belongs in a rate_limit")
			}
			continue
		}
		if !knownKeys[name] {
			ce.Problems = append(ce.Problems, fmt.Sprintf("%s: unknown key", p))
			continue
		}
		if !here[name] {
			d.Warnings = append(d.Warnings, fmt.Sprintf("%s: has no effect here", p))
		}
		if name == "metadata" {
			continue // free-form
		}
		var sub map[string]bool
		switch name {
		case "descriptors":
			sub = descriptorKeys
		case "rate_limit":
			sub = rateLimitKeys
		case "replaces":
			sub = replacesKeys
		}
		checkValue(ce, d, p, v, sub)
	}
}

func checkValue(ce *ConfigError, d *Domain, p string, v any, sub map[string]bool) {
	switch v := v.(type) {
	case []any:
		for i, e := range v {
			m, ok := e.(map[any]any)
			if !ok {
				ce.Problems = append(ce.Problems, fmt.Sprintf("%s[%d]: a list may hold only mappings, got %v", p, i, e))
				continue
			}
			checkKeys(ce, d, fmt.Sprintf("%s[%d]", p, i), m, sub)
		}
	case map[any]any:
		checkKeys(ce, d, p, v, sub)
	case string, int, bool, nil:
	default:
		ce.Problems = append(ce.Problems, fmt.Sprintf("%s: %v is not a string, an integer or a boolean", p, v))
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func at(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

// load builds n's children from descs, checking each as the reference
// does. path locates descs in the file; full is the metric path so far,
// comps the composite keys on the way; vtm is set when one of them has
// value_to_metric.
func (d *Domain) load(ce *ConfigError, n *node, path, full string, comps []string, vtm bool, descs []fileDescriptor) {
	for i, fd := range descs {
		p := fmt.Sprintf("%sdescriptors[%d]", path, i)
		if fd.Key == "" {
			ce.Problems = append(ce.Problems, p+".key: missing or empty")
			continue
		}
		composite := fd.Key
		if fd.Value != "" {
			composite += "_" + fd.Value
		}
		if _, dup := n.children[composite]; dup {
			ce.Problems = append(ce.Problems, fmt.Sprintf("%s: duplicate descriptor %q (key %q, value %q) at this level", p, full+composite, fd.Key, fd.Value))
			continue
		}
		c := &node{composite: composite, children: map[string]*node{}, valueToMetric: fd.ValueToMetric}
		here := append(comps[:len(comps):len(comps)], composite)
		if fd.RateLimit != nil {
			c.limit = d.loadLimit(ce, p+".rate_limit", full+composite, &fd)
			c.limit.id = limitID(d.Name, here, c.limit.Calendar != nil)
			c.limit.levels = here
			c.limit.valuesInMetric = vtm || fd.ValueToMetric
		}
		wild := strings.Contains(composite, "*")
		if fd.ShareThreshold {
			if !wild {
				ce.Problems = append(ce.Problems, fmt.Sprintf("%s.share_threshold: needs a wildcard ('*') in the key or value, got %q", p, composite))
			}
			c.shared = strings.TrimPrefix(composite, fd.Key+"_")
		}
		if wild {
			n.wild = append(n.wild, wildChild{parts: strings.Split(composite, "*"), n: c})
		}
		n.children[composite] = c
		d.load(ce, c, p+".", full+composite+".", here, vtm || fd.ValueToMetric, fd.Descriptors)
	}
}

func (d *Domain) loadLimit(ce *ConfigError, p, full string, fd *fileDescriptor) *Limit {
	rl := fd.RateLimit
	u, ok := pb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(rl.Unit)]
	valid := ok && u != int32(pb.RateLimitResponse_RateLimit_UNKNOWN)
	switch {
	case rl.Unlimited && valid:
		ce.Problems = append(ce.Problems, p+".unit: an unlimited rate_limit takes no unit")
	case !rl.Unlimited && !valid:
		ce.Problems = append(ce.Problems, fmt.Sprintf("%s.unit: %q is not one of second, minute, hour, day, week, month, year", p, rl.Unit))
	}
	l := &Limit{
		Name: rl.Name, RequestsPerUnit: rl.RequestsPerUnit, Unlimited: rl.Unlimited,
		Shadow: fd.ShadowMode, Quota: fd.QuotaMode, Detailed: fd.DetailedMetric, Path: full,
	}
	if rl.Calendar != nil {
		l.Calendar = loadCalendar(ce, p+".calendar", rl, pb.RateLimitResponse_RateLimit_Unit(u), valid)
	}
	if valid && !rl.Unlimited {
		l.Unit = pb.RateLimitResponse_RateLimit_Unit(u)
		if l.RequestsPerUnit > 0 {
			if err := checkLimit(l.RequestsPerUnit, l.Unit, 1); err != nil {
				ce.Problems = append(ce.Problems, fmt.Sprintf("%s: %v", p, err))
			}
		}
	}
	for j, r := range rl.Replaces {
		switch {
		case r.Name == "":
			ce.Problems = append(ce.Problems, fmt.Sprintf("%s.replaces[%d].name: missing or empty", p, j))
		case r.Name == rl.Name:
			ce.Problems = append(ce.Problems, fmt.Sprintf("%s.replaces[%d].name: %q is this limit's own name", p, j, r.Name))
		}
		l.Replaces = append(l.Replaces, r.Name)
	}
	d.limits = append(d.limits, l)
	return l
}

// NewConfig joins domains into a configuration; two files may not define
// one domain.
func NewConfig(domains ...*Domain) (*Config, error) {
	c := &Config{domains: make(map[string]*Domain, len(domains))}
	for _, d := range domains {
		if prev, dup := c.domains[d.Name]; dup {
			return nil, &ConfigError{File: d.File, Problems: []string{fmt.Sprintf("domain %q is already defined by %s", d.Name, prev.File)}}
		}
		c.domains[d.Name] = d
	}
	return c, nil
}

// Domains returns the configuration's domains.
func (c *Config) Domains() []*Domain {
	out := make([]*Domain, 0, len(c.domains))
	for _, d := range c.domains {
		out = append(out, d)
	}
	return out
}

// Limits returns the domain's limits in file order.
func (d *Domain) Limits() []*Limit { return d.limits }
