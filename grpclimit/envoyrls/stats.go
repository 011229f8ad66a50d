package envoyrls

import (
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
	// value_to_metric, as the request's values name it).
	Key string
	// Domain and Levels are Key split at the domain and at each level.
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
	domain                            string
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

// of returns the counters of key, or of fallback if key is new and the
// table is full.
func (st *stats) of(domain, key, fallback string) *statCounters {
	if c, ok := st.keys.Load(key); ok {
		return c
	}
	if key != fallback && st.size.Load() >= int64(st.max) {
		key = fallback
	}
	c, loaded := st.keys.LoadOrCompute(key, func() *statCounters {
		levels := strings.Split(strings.TrimPrefix(key, domain+"."), ".")
		return &statCounters{domain: domain, levels: levels}
	})
	if !loaded {
		st.size.Add(1)
	}
	return c
}

// snapshot returns every key's counters.
func (st *stats) snapshot() []Stat {
	var out []Stat
	st.keys.Range(func(key string, c *statCounters) bool {
		out = append(out, Stat{Key: key, Domain: c.domain, Levels: c.levels,
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
	if c.kind != kindBucket && c.kind != kindZero {
		return
	}
	var key, fallback string
	switch {
	case c.limit == nil:
		key = valuesKey(domain, entries, nil)
		fallback = domain + "." + c.ovName
	case c.limit.Detailed:
		key, fallback = valuesKey(domain, entries, c.shared), c.limit.Path
	case c.limit.valuesInMetric:
		key, fallback = c.dom.valueMetricKey(entries), c.limit.Path
	default:
		key, fallback = c.limit.Path, c.limit.Path
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

// valuesKey is the metric key naming each entry's key and value (or the
// share_threshold pattern it counts under), as detailed_metric asks.
func valuesKey(domain string, entries []*common.RateLimitDescriptor_Entry, shared []string) string {
	var b strings.Builder
	b.WriteString(domain)
	for i, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.GetKey())
		b.WriteByte('_')
		if shared != nil && shared[i] != "" {
			b.WriteString(shared[i])
		} else {
			b.WriteString(e.GetValue())
		}
	}
	return b.String()
}

// valueMetricKey is the metric key of a descriptor whose path has
// value_to_metric: each level as the configuration names it, except that
// a level with value_to_metric matched by its key alone or by a wildcard
// names the request's value (a share_threshold wildcard names its
// pattern, which all its matches count under).
func (d *Domain) valueMetricKey(entries []*common.RateLimitDescriptor_Entry) string {
	var b strings.Builder
	b.WriteString(d.Name)
	level := &d.root
	for _, e := range entries {
		next, how := level.step(e)
		if next == nil {
			break
		}
		b.WriteByte('.')
		switch {
		case how == byValue:
			b.WriteString(next.composite)
		case how == byWildcard && next.shared != "":
			b.WriteString(e.GetKey() + "_" + next.shared)
		case next.valueToMetric:
			b.WriteString(e.GetKey() + "_" + e.GetValue())
		default:
			b.WriteString(next.composite)
		}
		level = next
	}
	return b.String()
}
