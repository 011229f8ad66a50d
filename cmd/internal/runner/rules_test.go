package runner

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/cmd/internal/logtest"
)

// The rules file reloads through package reload: a change applies and
// keeps the buckets of the rules it leaves as they were, a bad file is
// reported once until it changes (or SIGHUP asks again) and counted in
// faucet_rules_reloads_total, and the rules in force stay.
func TestRulesFileReloadKeepsBucketsAndReportsOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rules.json")
	const ruleA = `{"name":"a","limit_keys":["ip:address"],"algorithm_config":{"rps":0.001,"burst":2}}`
	writeRules(t, path, `{"rules":[`+ruleA+`]}`)
	var logs logtest.Buffer
	s := newTestServer(t, &logs, nil, "--rules", path)
	allowed := func() bool {
		w := httptest.NewRecorder()
		s.public.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(`{"ip":"192.0.2.1"}`)))
		return strings.Contains(w.Body.String(), `"allowed":true`)
	}
	if !allowed() || !allowed() || allowed() {
		t.Fatal("burst 2: want two checks allowed, the third denied")
	}

	s.rules.Check(ctx, false)
	if n := len(logtest.Lines(t, logs.String())); n != 0 {
		t.Errorf("a check of an unchanged file logged %d lines:\n%s", n, logs.String())
	}

	writeRules(t, path, `{"rules":[`+ruleA+`,{"name":"b","limit_keys":["header:x-k"],"algorithm_config":{"rps":1,"burst":1}}]}`)
	s.rules.Check(ctx, false)
	if got := len(s.lim.Rules()); got != 2 {
		t.Fatalf("after a change: %d rules in force, want 2\n%s", got, logs.String())
	}
	if allowed() {
		t.Error("rule a's bucket was refilled by a reload that left it unchanged")
	}

	writeRules(t, path, `{"rules":[{"name":"a","limit_keys":["ip:address"],"algorithm_config":{"rps":5,"burst":1}}]}`)
	s.rules.Check(ctx, false)
	s.rules.Check(ctx, false)
	s.rules.Check(ctx, true) // SIGHUP
	failed := 0
	for _, l := range logtest.Lines(t, logs.String()) {
		if l.Msg == "reload failed, keeping the rules in force" {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("a bad file checked twice, then forced: %d failure lines, want 2 (once, and once for SIGHUP)\n%s", failed, logs.String())
	}
	if got := len(s.lim.Rules()); got != 2 {
		t.Errorf("after a bad file: %d rules in force, want the 2 before", got)
	}
	m := scrape(t, s)
	for _, want := range []string{`faucet_rules_reloads_total{result="success"} 1`, `faucet_rules_reloads_total{result="error"} 2`} {
		if !strings.Contains(m, "\n"+want+"\n") {
			t.Errorf("metrics:\n%s\nwant %s", logtest.Grep(m, "faucet_rules_reloads"), want)
		}
	}
}
