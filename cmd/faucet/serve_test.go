package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
	"github.com/faucetgo/faucet/httplimit"
)

// newTestServer builds a server from serve's command line, in this
// process, logging JSON to logs; store, if not nil, replaces the store of
// the flags.
func newTestServer(t *testing.T, logs io.Writer, store httplimit.Store, args ...string) *server {
	t.Helper()
	fs := flag.NewFlagSet("faucet serve", flag.ContinueOnError)
	var cfg serveConfig
	serveFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	opts, problems := cfg.options()
	rules, err := cfg.loadRules()
	if len(problems) > 0 || err != nil {
		t.Fatalf("flags %q: %v %v", args, problems, err)
	}
	opts.Store = store
	s, err := newServer(&cfg, opts, rules, newLogger("json", logs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.lim.Close() })
	return s
}

// failingStore is a store that is always down.
type failingStore struct{ *httplimit.MemoryStore }

func (failingStore) TakeAll(context.Context, time.Time, []httplimit.Take, []engine.Decision) (int, error) {
	return 0, errors.New("dial tcp 10.0.0.5:6379: connect: connection refused")
}

// scrape returns s's metrics as the admin listener serves them.
func scrape(t *testing.T, s *server) string {
	t.Helper()
	w := httptest.NewRecorder()
	s.admin.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("GET /metrics on the admin handler: %d", w.Code)
	}
	return w.Body.String()
}

// During a store outage every request fails to reach the store. Logging
// each (179,488 lines in 5 s, once) buries everything else; serve logs the
// first and then one line per 10 s, and counts every failure in
// faucet_store_errors_total.
func TestStoreOutageLogsAHandfulAndCountsAll(t *testing.T) {
	const n = 10_000
	var logs syncBuffer
	s := newTestServer(t, &logs, failingStore{httplimit.NewMemoryStore(httplimit.MemoryOptions{})})
	start := time.Now()
	for i := range n {
		w := httptest.NewRecorder()
		s.public.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(`{"ip":"192.0.2.1"}`)))
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"allowed":true`) {
			t.Fatalf("check %d with the store down: %d %s, want allowed (fail_mode open)", i, w.Code, w.Body)
		}
	}
	elapsed := time.Since(start)
	lines := jsonLines(t, logs.String())
	if most := 2 + int(elapsed/repeatInterval); len(lines) > most {
		t.Errorf("%d failing requests in %v wrote %d log lines, want at most %d", n, elapsed, len(lines), most)
	}
	if m := scrape(t, s); !strings.Contains(m, "\nfaucet_store_errors_total 10000\n") {
		t.Errorf("metrics:\n%s\nwant faucet_store_errors_total 10000", grepLines(m, "faucet_store_errors"))
	}
	// Nothing is lost: the lines held back, flushed, account for the rest.
	s.flushLogs()
	lines = jsonLines(t, logs.String())
	total := int64(0)
	for _, l := range lines {
		if !strings.HasPrefix(l.Msg, "bucket store failed") || !strings.Contains(l.Err, "connection refused") {
			t.Errorf("log line %+v, want the store's error", l)
		}
		total += 1 + l.Suppressed
	}
	if total != n {
		t.Errorf("log lines and their suppressed counts add up to %d, want %d", total, n)
	}
}

func TestAdminHandler(t *testing.T) {
	s := newTestServer(t, io.Discard, nil)
	for path, want := range map[string]int{"/healthz": 200, "/metrics": 200, "/v1/check": 404} {
		w := httptest.NewRecorder()
		s.admin.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != want {
			t.Errorf("admin GET %s: %d, want %d", path, w.Code, want)
		}
	}
	w := httptest.NewRecorder()
	s.public.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != 404 || strings.Contains(w.Body.String(), "faucet_") {
		t.Errorf("public GET /metrics in check API mode: %d %.60q, want 404", w.Code, w.Body)
	}
}

func TestServeLogAndAdminFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--log-format", "xml"}, `--log-format: must be text or json, got "xml"`},
		{[]string{"--metrics-path", "metrics"}, `--metrics-path: must start with /`},
		{[]string{"--metrics-path", "/healthz"}, `--metrics-path: /healthz is the health check's`},
		{[]string{"--admin-listen", "", "--metrics-path", "/m"}, `--metrics-path: only means something with --admin-listen`},
	} {
		code, _, errs := runArgs(append([]string{"serve", "--validate"}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.msg) {
			t.Errorf("faucet serve %q: exit %d, %q; want exit 2 and %q", tt.args, code, errs, tt.msg)
		}
	}
}
