package runner

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/faucetgo/faucet/cmd/internal/logtest"
	"github.com/faucetgo/faucet/cmd/internal/logthrottle"
	"github.com/faucetgo/faucet/cmd/internal/settings"
	"github.com/faucetgo/faucet/engine"
)

// newTestServer builds a server from serve's command line, in this
// process, logging JSON to logs; store, if not nil, replaces the store of
// the flags.
func newTestServer(t *testing.T, logs io.Writer, store engine.Store, args ...string) *server {
	t.Helper()
	fs := flag.NewFlagSet("faucet serve", flag.ContinueOnError)
	var cfg settings.Serve
	cfg.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	opts, problems := cfg.Options()
	rules, digest, err := readRules(&cfg)
	if len(problems) > 0 || err != nil {
		t.Fatalf("flags %q: %v %v", args, problems, err)
	}
	opts.Store = store
	s := newServer(&cfg, newLogger("json", logs))
	if err := s.build(opts, inputs{rules: rules, rulesDigest: digest}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.closers.close(context.Background()) })
	return s
}

// runArgs runs `faucet serve` as the command does, args[0] being "serve".
func runArgs(args ...string) (code int, stdout, stderr string) {
	if args[0] != "serve" {
		panic("runArgs: not a serve command line")
	}
	var out, errb bytes.Buffer
	code = Run(args[1:], &out, &errb)
	return code, out.String(), errb.String()
}

func writeRules(t testing.TB, path, doc string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// failingStore is a store that is always down.
type failingStore struct{}

func (failingStore) Bind(s engine.Spec) (engine.Limiter, error) { return downLimiter{s}, nil }
func (failingStore) Release(engine.Limiter)                     {}

// downLimiter is a Limiter whose store cannot be reached.
type downLimiter struct{ s engine.Spec }

func (downLimiter) Take(context.Context, string, float64) (engine.Decision, error) {
	return engine.Decision{}, errDown
}
func (downLimiter) TakeAll(context.Context, []engine.Take, []engine.Decision) (int, error) {
	return -1, errDown
}
func (d downLimiter) Limit() engine.Limit { return d.s.Limit }
func (d downLimiter) Burst() float64      { return d.s.Burst }
func (downLimiter) Close() error          { return nil }

var errDown = fmt.Errorf("dial tcp 10.0.0.5:6379: connect: connection refused: %w", engine.ErrUnavailable)

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
	var logs logtest.Buffer
	s := newTestServer(t, &logs, failingStore{})
	start := time.Now()
	for i := range n {
		w := httptest.NewRecorder()
		s.public.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(`{"ip":"192.0.2.1"}`)))
		// A store without a fallback: the default rule refuses.
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"status":503`) || !strings.Contains(w.Body.String(), `"store_error":true`) {
			t.Fatalf("check %d with the store down: %d %s, want 503 and store_error (no fallback decision)", i, w.Code, w.Body)
		}
	}
	elapsed := time.Since(start)
	lines := logtest.Lines(t, logs.String())
	if most := 2 + int(elapsed/logthrottle.Interval); len(lines) > most {
		t.Errorf("%d failing requests in %v wrote %d log lines, want at most %d", n, elapsed, len(lines), most)
	}
	if m := scrape(t, s); !strings.Contains(m, "\nfaucet_store_errors_total 10000\n") {
		t.Errorf("metrics:\n%s\nwant faucet_store_errors_total 10000", logtest.Grep(m, "faucet_store_errors"))
	}
	// Nothing is lost: the lines held back, flushed, account for the rest.
	s.logs.Flush()
	lines = logtest.Lines(t, logs.String())
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
		{[]string{"--on-full", "admit"}, `--on-full: must be share or deny, got "admit"`},
		{[]string{"--on-full", "deny", "--redis", "127.0.0.1:6379"}, `--on-full: only means something without --redis`},
		{[]string{"--on-full", "deny", "--postgres", "postgres://u@127.0.0.1/db"}, `--on-full: only means something without --redis and --postgres`},
	} {
		code, _, errs := runArgs(append([]string{"serve", "--validate"}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.msg) {
			t.Errorf("faucet serve %q: exit %d, %q; want exit 2 and %q", tt.args, code, errs, tt.msg)
		}
	}
}

// A key table filled by floods of API keys (--max-keys) keeps limiting:
// five floods of 100 distinct keys against 100 buckets, then 20 requests
// from a new key, get no more than one burst through together (a new key
// used to get 20 of 20). Every overflowing request is counted in
// faucet_overflow_total, and the log gets one line per rule per report,
// not one per request.
func TestFullKeyTableIsLimitedCountedAndLogged(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"key","limit_keys":["header:x-api-key"],"algorithm_config":{"rps":0.001,"burst":5}}]}`)
	for _, tc := range []struct{ onFull, line string }{
		{"share", "key table full: keys without a bucket took from the rule's overflow bucket"},
		{"deny", "key table full: keys without a bucket were denied"},
	} {
		t.Run("on-full="+tc.onFull, func(t *testing.T) {
			var logs logtest.Buffer
			s := newTestServer(t, &logs, nil, "--rules", rules, "--max-keys", "100", "--on-full", tc.onFull)
			check := func(key string) bool {
				w := httptest.NewRecorder()
				s.public.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(`{"headers":{"x-api-key":"`+key+`"}}`)))
				return strings.Contains(w.Body.String(), `"allowed":true`)
			}
			admitted := 0
			for flood := range 5 {
				for i := range 100 {
					if check(fmt.Sprintf("flood%d-%d", flood, i)) && flood > 0 {
						admitted++
					}
				}
			}
			for range 20 {
				if check("new-client") {
					admitted++
				}
			}
			if max := map[string]int{"share": 5, "deny": 0}[tc.onFull]; admitted > max {
				t.Errorf("keys that found the table full got %d requests through, want at most %d", admitted, max)
			}
			if m := scrape(t, s); !strings.Contains(m, "\nfaucet_overflow_total{rule=\"key\"} 420\n") {
				t.Errorf("metrics:\n%s\nwant faucet_overflow_total{rule=\"key\"} 420", logtest.Grep(m, "faucet_overflow"))
			}
			s.reportOverflow()
			s.reportOverflow() // nothing new: no second line
			lines := logtest.Lines(t, logs.String())
			if len(lines) != 1 || lines[0].Msg != tc.line || !strings.Contains(logs.String(), `"requests":420`) {
				t.Errorf("log:\n%s\nwant one line %q with requests 420", logs.String(), tc.line)
			}
		})
	}
}
