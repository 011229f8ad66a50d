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
