package metrics

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/conncap"
	"github.com/faucetgo/faucet/grpclimit/envoyrls"
	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/internal/failpolicy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics exports the limiter's counters, read at scrape time so that
// requests pay nothing for them, and serve's own.
type Metrics struct {
	lim            *httplimit.Middleware // set by Watch before the first scrape
	rls            *envoyrls.Server      // set by WatchRLS before the first scrape, if --rls
	reg            *prometheus.Registry
	Handler        http.Handler
	reloads        *prometheus.CounterVec
	lastOK         prometheus.Gauge
	StoreErrors    prometheus.Counter
	UpstreamErrors *prometheus.CounterVec
	Upgrades       *prometheus.CounterVec
	TunnelsOpen    prometheus.Gauge
	TunnelsClosed  *prometheus.CounterVec

	decisions, fallback, live, evictions, overflow, jwtRejected, invalidPaths *prometheus.Desc
	// Delay mode and in-flight limits.
	delayWaiting, delayFull, delayCancelled, delayed, inFlight, adaptiveRate *prometheus.Desc
	// The rate-limit service's request-carried limits.
	rlsOverrides, rlsOverridesEvicted, rlsOverridesRefused *prometheus.Desc
	// rateLimit holds the counters envoyproxy/ratelimit exports, by the
	// names its users' dashboards know: total_hits, over_limit, near_limit,
	// within_limit, shadow_mode. Built once: reloads and scrapes only read
	// them.
	rateLimit [5]*prometheus.Desc
}

// rateLimitStats are the stats of rateLimit, in its order.
var rateLimitStats = [5]string{"total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"}

// rateLimitDescs describes the counters of rateLimitStats.
func rateLimitDescs() [5]*prometheus.Desc {
	var out [5]*prometheus.Desc
	for i, name := range rateLimitStats {
		out[i] = prometheus.NewDesc("ratelimit_service_rate_limit_"+name,
			"envoyproxy/ratelimit's ratelimit.service.rate_limit.DOMAIN.KEY."+name+", in hits (request costs) for the rate-limit service and in requests for HTTP rules (domain \"http\", key1 the rule's name). key1 is the first level of the key, key2 the rest, joined by dots.",
			[]string{"domain", "key1", "key2"}, nil)
	}
	return out
}

// New returns serve's metrics, registered and ready to scrape.
func New() *Metrics {
	m := &Metrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faucet_rules_reloads_total", Help: "Reloads of the rules file, by result (success, error).",
		}, []string{"result"}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "faucet_rules_last_reload_success_timestamp_seconds", Help: "When the rules in force were loaded.",
		}),
		StoreErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "faucet_store_errors_total",
			Help: "Calls to the bucket store that failed or timed out (HTTP rules and the rate-limit service), all counted though repeats are logged once per 10 s; the in-memory fallback, or a rule's fail_mode open or closed, answered them.",
		}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faucet_upstream_errors_total",
			Help: "Proxied requests the upstream failed, by the status answered: 504 (no answer within --upstream-timeout), 502 (any other failure).",
		}, []string{"status"}),
		Upgrades: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faucet_upgrades_total",
			Help: "Proxied requests asking to switch protocols, by result: allowed (--upgrade lists the protocol), refused (403), h2c_downgraded (proxied as plain HTTP/1.1), connect_refused (CONNECT, 405).",
		}, []string{"result"}),
		TunnelsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "faucet_tunnels_open", Help: "Upgraded connections open through the proxy.",
		}),
		TunnelsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faucet_tunnels_closed_total",
			Help: "Upgraded connections ended, by reason: duration (--upgrade-max-duration), idle (--upgrade-idle-timeout), bytes (--upgrade-max-bytes), closed (by the client or the upstream).",
		}, []string{"reason"}),
		decisions: prometheus.NewDesc("faucet_decisions_total",
			"Requests per rule and result: allowed, denied, shadow_denied (a shadow rule would have denied), refused (400: a client's cost malformed or outside min_cost and max_cost, or a header or query parameter the rule reads sent with several values), failed_open and failed_closed (the store failed).",
			[]string{"rule", "result"}, nil),
		fallback: prometheus.NewDesc("faucet_fallback_decisions_total",
			"Requests per rule that the shared store failed to decide and its in-memory fallback decided, at 1/faucet_store_instances of the rule's limit unless a --*-fallback-share fixes it; also counted as allowed or denied in faucet_decisions_total.",
			[]string{"rule"}, nil),
		live:      prometheus.NewDesc("faucet_live_keys", "Live buckets per rule.", []string{"rule"}, nil),
		evictions: prometheus.NewDesc("faucet_evictions_total", "Buckets evicted (full, so lossless) per rule, since the rule was loaded.", []string{"rule"}, nil),
		overflow: prometheus.NewDesc("faucet_overflow_total",
			"Requests per rule on keys that found the key table full (--max-keys live, none full): decided by the rule's shared overflow bucket (--on-full share) or denied (deny).",
			[]string{"rule"}, nil),
		jwtRejected: prometheus.NewDesc("faucet_jwt_rejected_total",
			"Bearer tokens a rule needed that were treated as absent, by reason: malformed, signature (or unknown key, or algorithm), expired, not_yet_valid, claims (issuer, audience, required claim), other.",
			[]string{"reason"}, nil),
		rlsOverrides: prometheus.NewDesc("faucet_rls_overrides",
			"Limits carried by rate-limit service requests (a descriptor's limit) bound now, each a bucket set per domain: at most 64, an equal share per configured domain.", nil, nil),
		rlsOverridesEvicted: prometheus.NewDesc("faucet_rls_overrides_evicted_total",
			"Request-carried limits unbound, their buckets full again: idle for 10 minutes, or the least recently used when a new one needed its domain's room.", nil, nil),
		rlsOverridesRefused: prometheus.NewDesc("faucet_rls_overrides_refused_total",
			"Rate-limit service requests answered OVER_LIMIT because their new request-carried limit found no room in its domain's share.", nil, nil),
		invalidPaths: prometheus.NewDesc("faucet_invalid_paths_total",
			"Requests answered 400 because their path has no canonical form (%00, a malformed escape, and unless the --path flags allow them %2F, %5C, \\, ;); they take no token.",
			nil, nil),
		delayWaiting: prometheus.NewDesc("faucet_delay_waiting",
			"Requests waiting their turn under rules in delay mode now, each holding its connection: at most --max-waiting.", nil, nil),
		delayFull: prometheus.NewDesc("faucet_delay_full_total",
			"Requests that would have waited in delay mode, answered 429 (delay_full) because --max-waiting requests waited already; not in faucet_decisions_total.",
			nil, nil),
		delayCancelled: prometheus.NewDesc("faucet_delay_cancelled_total",
			"Requests whose client left while they waited in delay mode: their tokens were given back.", nil, nil),
		delayed: prometheus.NewDesc("faucet_delayed_total",
			"Requests per rule in delay mode admitted after a wait; also counted as allowed in faucet_decisions_total.", []string{"rule"}, nil),
		adaptiveRate: prometheus.NewDesc("faucet_adaptive_rate",
			"The rate in force of each adaptive rule, tokens per second: between its floor and its own rate, following the upstream's latency and errors.",
			[]string{"rule"}, nil),
		inFlight: prometheus.NewDesc("faucet_in_flight",
			"Requests per in-flight limit (\"algorithm\": \"concurrency\") holding a slot now, across its keys: admitted and not yet answered.",
			[]string{"rule"}, nil),
	}
	m.rateLimit = rateLimitDescs()
	m.lastOK.Set(float64(time.Now().Unix()))
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("error")
	m.UpstreamErrors.WithLabelValues("502")
	m.UpstreamErrors.WithLabelValues("504")
	m.reg = prometheus.NewRegistry()
	m.reg.MustRegister(m, m.reloads, m.lastOK, m.StoreErrors, m.UpstreamErrors, m.Upgrades, m.TunnelsOpen, m.TunnelsClosed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// WatchPeers exports the count of the instances sharing the store; it is
// called once, before serving, with a shared store.
func (m *Metrics) WatchPeers(p *failpolicy.Peers) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "faucet_store_instances",
		Help: "Instances sharing the bucket store, as their heartbeats in it counted them last (1 before the store first answered): the N whose 1/N share of each limit the in-memory fallback keeps while the store fails.",
	}, func() float64 { return float64(p.N()) }))
}

// Watch exports lim's counters; it is called once, before serving.
func (m *Metrics) Watch(lim *httplimit.Middleware) { m.lim = lim }

// WatchRLS exports the rate-limit service's counters; it is called once,
// before serving.
func (m *Metrics) WatchRLS(srv *envoyrls.Server) { m.rls = srv }

// WatchRLSCalls exports the rate-limit service's unary calls in flight and
// the calls refused at --rls-max-calls or at the streaming cap; it is
// called once, before serving.
func (m *Metrics) WatchRLSCalls(inFlight, refused *atomic.Int64) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "faucet_rls_calls_in_flight", Help: "Rate-limit service unary calls in flight, over all connections (streams apart).",
		}, func() float64 { return float64(inFlight.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "faucet_rls_calls_refused_total", Help: "Rate-limit service calls answered RESOURCE_EXHAUSTED, --rls-max-calls unary calls or 100 streams being in flight.",
		}, func() float64 { return float64(refused.Load()) }),
	)
}

// WatchConns exports the connection counts of listener name; it is called
// once per listener, before serving.
func (m *Metrics) WatchConns(name string, c *conncap.Listener) {
	labels := prometheus.Labels{"listener": name}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "faucet_connections_open", Help: "Client connections open, by listener.", ConstLabels: labels,
		}, func() float64 { open, _, _ := c.Stats(); return float64(open) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "faucet_connections_evicted_total", ConstLabels: labels,
			Help: "Quiet connections (idle after a request or call, or silent for 1 s since they connected) closed to make room for a new one at --max-conns, by listener.",
		}, func() float64 { _, evicted, _ := c.Stats(); return float64(evicted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "faucet_connections_rejected_total", ConstLabels: labels,
			Help: "New connections refused at --max-conns (answered 503 on an HTTP listener): none could be evicted within --read-header-timeout, or 64 were waiting already, by listener.",
		}, func() float64 { _, _, rejected := c.Stats(); return float64(rejected) }),
	)
}

// Reloaded counts a reload of the rules, which succeeded if ok.
func (m *Metrics) Reloaded(ok bool) {
	if ok {
		m.reloads.WithLabelValues("success").Inc()
		m.lastOK.Set(float64(time.Now().Unix()))
	} else {
		m.reloads.WithLabelValues("error").Inc()
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.decisions
	ch <- m.live
	ch <- m.evictions
	ch <- m.overflow
	ch <- m.jwtRejected
	ch <- m.rlsOverrides
	ch <- m.rlsOverridesEvicted
	ch <- m.rlsOverridesRefused
	ch <- m.invalidPaths
	ch <- m.fallback
	ch <- m.delayWaiting
	ch <- m.delayFull
	ch <- m.delayCancelled
	ch <- m.delayed
	ch <- m.inFlight
	ch <- m.adaptiveRate
	for _, d := range m.rateLimit {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	// An RLS domain may be named "http", as the HTTP rules' is.
	series := map[[3]string][5]uint64{}
	if m.lim != nil {
		m.collectHTTP(ch, series)
	}
	if m.rls != nil {
		o := m.rls.OverrideStats()
		ch <- prometheus.MustNewConstMetric(m.rlsOverrides, prometheus.GaugeValue, float64(o.Bound))
		ch <- prometheus.MustNewConstMetric(m.rlsOverridesEvicted, prometheus.CounterValue, float64(o.Evicted))
		ch <- prometheus.MustNewConstMetric(m.rlsOverridesRefused, prometheus.CounterValue, float64(o.Refused))
		for _, s := range m.rls.Stats() {
			addSeries(series, s.Domain, s.Levels, [5]uint64{s.TotalHits, s.OverLimit, s.NearLimit, s.WithinLimit, s.ShadowMode})
		}
	}
	for k, n := range series {
		for i, d := range m.rateLimit {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n[i]), k[0], k[1], k[2])
		}
	}
}

// collectHTTP emits the counters of the HTTP rules, and adds their
// envoyproxy/ratelimit counters to series.
func (m *Metrics) collectHTTP(ch chan<- prometheus.Metric, series map[[3]string][5]uint64) {
	for _, s := range m.lim.Stats() {
		if s.Delay {
			ch <- prometheus.MustNewConstMetric(m.delayed, prometheus.CounterValue, float64(s.Delayed), s.Name)
		}
		if s.Shape == httplimit.ShapeConcurrency {
			ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(s.InFlight), s.Name)
		}
		if s.Adaptive {
			ch <- prometheus.MustNewConstMetric(m.adaptiveRate, prometheus.GaugeValue, s.Rate, s.Name)
		}
		for _, c := range []struct {
			result string
			n      uint64
		}{{"allowed", s.Allowed}, {"denied", s.Denied}, {"shadow_denied", s.ShadowDenied}, {"refused", s.Refused},
			{"failed_open", s.FailedOpen}, {"failed_closed", s.FailedClosed}} {
			ch <- prometheus.MustNewConstMetric(m.decisions, prometheus.CounterValue, float64(c.n), s.Name, c.result)
		}
		ch <- prometheus.MustNewConstMetric(m.fallback, prometheus.CounterValue, float64(s.Fallback), s.Name)
		addSeries(series, "http", []string{s.Name}, [5]uint64{s.Allowed + s.Denied + s.ShadowDenied, s.Denied + s.ShadowDenied, s.NearLimit, s.Allowed, s.ShadowDenied})
		if s.HasBuckets {
			ch <- prometheus.MustNewConstMetric(m.live, prometheus.GaugeValue, float64(s.Live), s.Name)
			ch <- prometheus.MustNewConstMetric(m.evictions, prometheus.CounterValue, float64(s.Evicted), s.Name)
			ch <- prometheus.MustNewConstMetric(m.overflow, prometheus.CounterValue, float64(s.Overflow), s.Name)
		}
	}
	j := m.lim.JWTStats()
	for _, c := range []struct {
		reason string
		n      uint64
	}{{"malformed", j.Malformed}, {"signature", j.Signature}, {"expired", j.Expired},
		{"not_yet_valid", j.NotYetValid}, {"claims", j.Claims}, {"other", j.Other}} {
		ch <- prometheus.MustNewConstMetric(m.jwtRejected, prometheus.CounterValue, float64(c.n), c.reason)
	}
	ch <- prometheus.MustNewConstMetric(m.invalidPaths, prometheus.CounterValue, float64(m.lim.InvalidPaths()))
	d := m.lim.DelayStats()
	ch <- prometheus.MustNewConstMetric(m.delayWaiting, prometheus.GaugeValue, float64(d.Waiting))
	ch <- prometheus.MustNewConstMetric(m.delayFull, prometheus.CounterValue, float64(d.Full))
	ch <- prometheus.MustNewConstMetric(m.delayCancelled, prometheus.CounterValue, float64(d.Cancelled))
}

// addSeries adds a key's counters to its series under
// envoyproxy/ratelimit's labels (domain, key1, key2). Levels holding dots,
// such as [a b.c] and [a b c], share key2: their counters are summed, as a
// label set sent twice would fail the whole scrape.
func addSeries(series map[[3]string][5]uint64, domain string, levels []string, n [5]uint64) {
	k := [3]string{domain, levels[0], strings.Join(levels[1:], ".")}
	sum := series[k]
	for i, v := range n {
		sum[i] += v
	}
	series[k] = sum
}

// Register exports collectors of the parts of serve (the audit log); it is
// called before serving.
func (m *Metrics) Register(cs ...prometheus.Collector) { m.reg.MustRegister(cs...) }
