package metrics

import (
	"strings"
	"sync"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A reload of the rules may come while a scrape runs: run under -race, the
// two share nothing unguarded, and every scrape has the envoyproxy/ratelimit
// series of the rules.
func TestReloadedWhileScraped(t *testing.T) {
	lim, err := httplimit.New([]httplimit.Rule{{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: 5, Burst: 10}}, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	m := New()
	m.Watch(lim)
	const reloads = 200
	var wg sync.WaitGroup
	wg.Go(func() {
		for range reloads {
			m.Reloaded(true)
		}
	})
	for range 50 {
		fams, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range fams {
			found = found || strings.HasPrefix(f.GetName(), "ratelimit_service_rate_limit_total_hits")
		}
		if !found {
			t.Fatal("a scrape without ratelimit_service_rate_limit_total_hits")
		}
	}
	wg.Wait()
	if n := testutil.ToFloat64(m.reloads.WithLabelValues("success")); n != reloads {
		t.Errorf("faucet_rules_reloads_total{result=\"success\"} = %v, want %d", n, reloads)
	}
}

// The series of delay mode and in-flight limits are exported for the rules
// that have them, and only for those.
func TestDelayAndInFlightSeries(t *testing.T) {
	rules, err := httplimit.ParseRules([]byte(`{"rules":[
	  {"name":"slow","limit_keys":["ip:address"],"algorithm_config":{"rps":20,"burst":1},"delay":{"max_delay":"2s"}},
	  {"name":"conc","limit_keys":["path"],"algorithm":"concurrency","algorithm_config":{"max_in_flight":5}},
	  {"name":"plain","limit_keys":["header:x-key"],"algorithm_config":{"rps":5,"burst":10}},
	  {"name":"upstream","limit_keys":["global"],"algorithm_config":{"rps":500,"burst":500},"adaptive":{"floor":50,"latency_target":"100ms"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := httplimit.New(rules, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	m := New()
	m.Watch(lim)
	want := `
# HELP faucet_delay_waiting Requests waiting their turn under rules in delay mode now, each holding its connection: at most --max-waiting.
# TYPE faucet_delay_waiting gauge
faucet_delay_waiting 0
# HELP faucet_delayed_total Requests per rule in delay mode admitted after a wait; also counted as allowed in faucet_decisions_total.
# TYPE faucet_delayed_total counter
faucet_delayed_total{rule="slow"} 0
# HELP faucet_in_flight Requests per in-flight limit ("algorithm": "concurrency") holding a slot now, across its keys: admitted and not yet answered.
# TYPE faucet_in_flight gauge
faucet_in_flight{rule="conc"} 0
# HELP faucet_adaptive_rate The rate in force of each adaptive rule, tokens per second: between its floor and its own rate, following the upstream's latency and errors.
# TYPE faucet_adaptive_rate gauge
faucet_adaptive_rate{rule="upstream"} 500
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "faucet_delay_waiting", "faucet_delayed_total", "faucet_in_flight", "faucet_adaptive_rate"); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"faucet_delay_full_total", "faucet_delay_cancelled_total"} {
		if n, err := testutil.GatherAndCount(m.reg, name); err != nil || n != 1 {
			t.Errorf("%s: %d series, %v; want 1", name, n, err)
		}
	}
}
