package envoyrls

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"sync/atomic"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/puzpuzpuz/xsync/v3"
)

// Stat is one metric key's counters, in hits (each request counts its
// cost), under the names envoyproxy/ratelimit gives them:
// ratelimit.service.rate_limit.KEY.total_hits and so on.
type Stat struct {
	// Key is "DOMAIN.KEY_VALUE…": the domain, then each level's composite
	// key as the limit's configuration names it (with detailed_metric or
	// value_to_metric, as the request's values name it; a key or value
	// from the request longer than 64 bytes by its digest, "sha256-" and
	// 16 hex digits, and the levels past 512 bytes as one level, by the
	// digest of their text). Levels may hold dots, so two Stats may have
	// the same Key: Domain and Levels tell them apart.
	Key string
	// Domain and Levels are Key's domain and levels, each level whole
	// (a value's dots are not level separators).
	Domain string
	Levels []string
	// TotalHits counts every hit; OverLimit those of requests the limit
	// could not cover (a shadow limit's included); ShadowMode those a
	// shadow limit would have denied; WithinLimit those it could cover;
	// NearLimit those among them that left it under a fifth of its burst
	// (the reference's near-limit ratio of 0.8).
	TotalHits, OverLimit, NearLimit, WithinLimit, ShadowMode uint64
}

// statCounters are one metric key's counters.
type statCounters struct {
	name, domain                      string
	levels                            []string
	total, over, near, within, shadow atomic.Uint64
}

// stats holds the counters by metric key; they survive reloads. A key that
// names request values is created only while fewer than max keys exist,
// else its hits count under the limit's own Path.
type stats struct {
	keys *xsync.MapOf[string, *statCounters]
	max  int
	size atomic.Int64
}

func newStats(max int) *stats {
	return &stats{keys: xsync.NewMapOf[string, *statCounters](), max: max}
}

// metricKey is a metric key as its levels, the domain apart.
type metricKey []string

// key is the key as shown: the domain and the levels, joined by dots.
// Levels may hold dots, so two keys can show alike.
func (k metricKey) key(domain string) string {
	return domain + "." + strings.Join(k, ".")
}

// id tells keys apart, where key may not: each part prefixed by its
// length.
func (k metricKey) id(domain string) string {
	n := len(domain) + 4
	for _, l := range k {
		n += len(l) + 4
	}
	b := make([]byte, 0, n)
	b = strconv.AppendInt(b, int64(len(domain)), 10)
	b = append(append(b, ':'), domain...)
	for _, l := range k {
		b = strconv.AppendInt(append(b, ','), int64(len(l)), 10)
		b = append(append(b, ':'), l...)
	}
	return string(b)
}

// of returns the counters of key, or of fallback if key is new and the
// table is full.
func (st *stats) of(domain string, key, fallback metricKey) *statCounters {
	id := key.id(domain)
	if c, ok := st.keys.Load(id); ok {
		return c
	}
	if st.size.Load() >= int64(st.max) {
		if fb := fallback.id(domain); fb != id {
			id, key = fb, fallback
		}
	}
	c, loaded := st.keys.LoadOrCompute(id, func() *statCounters {
		// The levels are slices of the shown key, which holds them all.
		name := key.key(domain)
		levels := make([]string, len(key))
		at := len(domain) + 1
		for i, l := range key {
			levels[i] = name[at : at+len(l)]
			at += len(l) + 1
		}
		return &statCounters{name: name, domain: domain, levels: levels}
	})
	if !loaded {
		st.size.Add(1)
	}
	return c
}

// snapshot returns every key's counters.
func (st *stats) snapshot() []Stat {
	var out []Stat
	st.keys.Range(func(_ string, c *statCounters) bool {
		out = append(out, Stat{Key: c.name, Domain: c.domain, Levels: c.levels,
			TotalHits: c.total.Load(), OverLimit: c.over.Load(), NearLimit: c.near.Load(),
			WithinLimit: c.within.Load(), ShadowMode: c.shadow.Load()})
		return true
	})
	return out
}

// Stats returns the counters of every metric key seen, in no order.
func (s *Server) Stats() []Stat { return s.stats.snapshot() }

// count adds the outcome of check c, of a descriptor with entries, to its
// metric key's counters.
func (s *Server) count(domain string, entries []*common.RateLimitDescriptor_Entry, c *check) {
	if c.kind != kindBucket && c.kind != kindZero && c.kind != kindNoRoom {
		return
	}
	var key, fallback metricKey
	switch {
	case c.limit == nil:
		key = valuesKey(entries, nil, true)
		fallback = metricKey{c.ovName}
	case c.limit.Detailed:
		key, fallback = valuesKey(entries, c.shared, false), c.limit.levels
	case c.limit.valuesInMetric:
		key, fallback = c.dom.valueMetricKey(entries), c.limit.levels
	default:
		key, fallback = c.limit.levels, c.limit.levels
	}
	sc := s.stats.of(domain, key, fallback)
	n := uint64(c.cost)
	sc.total.Add(n)
	switch {
	case c.over:
		sc.over.Add(n)
		if c.shadow {
			sc.shadow.Add(n)
		}
	default:
		sc.within.Add(n)
		if c.kind == kindBucket && c.d.Remaining < float64(c.perUnit)/5 {
			sc.near.Add(n)
		}
	}
}

// maxMetricPart bounds a request's key or value in a metric key: a longer
// one is named by its digest, so that the table of metric keys and a
// scrape of it stay small whatever the requests carry.
const maxMetricPart = 64

// maxMetricKey bounds the levels of a metric key built from a request's
// entries: past it, the rest is one level, named by its digest.
const maxMetricKey = 512

// bounded is k with the levels past maxMetricKey bytes joined into one,
// named by their digest.
func (k metricKey) bounded() metricKey {
	n := 0
	for i, l := range k {
		if n += len(l) + 1; n > maxMetricKey {
			return append(k[:i:i], metricPart(strings.Join(k[i:], ".")))
		}
	}
	return k
}

// metricPart is a request's key or value as a metric key names it.
func metricPart(v string) string {
	if len(v) <= maxMetricPart {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256-" + hex.EncodeToString(sum[:8])
}

// valuesKey is the metric key naming each entry's key and value (or the
// share_threshold pattern it counts under), as detailed_metric asks; keys
// are the configuration's unless requestKeys (a request-carried limit).
func valuesKey(entries []*common.RateLimitDescriptor_Entry, shared []string, requestKeys bool) metricKey {
	k := make(metricKey, len(entries))
	for i, e := range entries {
		key := e.GetKey()
		if requestKeys {
			key = metricPart(key)
		}
		if shared != nil && shared[i] != "" {
			k[i] = key + "_" + shared[i]
		} else {
			k[i] = key + "_" + metricPart(e.GetValue())
		}
	}
	return k.bounded()
}

// valueMetricKey is the metric key of a descriptor whose path has
// value_to_metric: each level as the configuration names it, except that
// a level with value_to_metric matched by its key alone or by a wildcard
// names the request's value (a share_threshold wildcard names its
// pattern, which all its matches count under).
func (d *Domain) valueMetricKey(entries []*common.RateLimitDescriptor_Entry) metricKey {
	k := make(metricKey, 0, len(entries))
	level := &d.root
	for _, e := range entries {
		next, how := level.step(e)
		if next == nil {
			break
		}
		switch {
		case how == byValue:
			k = append(k, next.composite)
		case how == byWildcard && next.shared != "":
			k = append(k, e.GetKey()+"_"+next.shared)
		case next.valueToMetric:
			k = append(k, e.GetKey()+"_"+metricPart(e.GetValue()))
		default:
			k = append(k, next.composite)
		}
		level = next
	}
	return k.bounded()
}
