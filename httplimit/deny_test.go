package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// OnDeny hears of every 429 with the rule, the bucket key, the whole client
// address (not the /64 that keys it), the identity key's value, the method,
// the path, the decision's time and the tokens left; of every shadow rule's
// would-deny, flagged; and of nothing else: not of admissions, nor of a 400
// for a refused cost.
func TestOnDeny(t *testing.T) {
	var got []httplimit.Denial
	opts := httplimit.Options{OnDeny: func(d httplimit.Denial) { got = append(got, d) }}
	l, c := newLimiter(t, `{"rules":[
	 {"name":"per-key","limit_keys":["ip:address","header:x-api-key"],"algorithm_config":{"rps":1,"burst":2},
	  "match":{"path_prefix":["/api"]}},
	 {"name":"watch","limit_keys":["query:user"],"algorithm_config":{"rps":1,"burst":1},"mode":"shadow",
	  "match":{"path_prefix":["/shadow"]}},
	 {"name":"costly","limit_keys":["path"],"algorithm_config":{"rps":1,"burst":5,
	  "cost_source":"header:x-cost","max_cost":3,"cost_out_of_range":"reject"},"match":{"path_prefix":["/cost"]}}]}`, opts)
	r := func(target string, headers ...string) *http.Request {
		q := req("[2001:db8::1:2:3:4]:5000", target, headers...)
		q.Method = http.MethodPost
		return q
	}
	for i := range 3 {
		w := serve(l, r("/api/x", "X-Api-Key", "k1"))
		if want := []int{200, 200, 429}[i]; w.Code != want {
			t.Fatalf("request %d: status %d, want %d", i, w.Code, want)
		}
	}
	if len(got) != 1 {
		t.Fatalf("OnDeny called %d times after two admissions and a denial, want 1: %+v", len(got), got)
	}
	d := got[0]
	want := httplimit.Denial{Rule: "per-key", Reason: httplimit.ReasonExceeded, Key: "13:2001:db8::/642:k1",
		ClientIP: netip.MustParseAddr("2001:db8::1:2:3:4"), Identity: "k1", Method: "POST", Path: "/api/x",
		Time: c.Now(), Cost: 1, Remaining: 0}
	if d != want {
		t.Errorf("denial\n got %+v\nwant %+v", d, want)
	}

	// A shadow rule's would-deny: the request passes, the denial is flagged.
	got = nil
	for range 2 {
		if w := serve(l, r("/shadow?user=42")); w.Code != 200 {
			t.Fatalf("shadow rule: status %d, want 200", w.Code)
		}
	}
	if len(got) != 1 || !got[0].Shadow || got[0].Rule != "watch" || got[0].Identity != "42" || got[0].Key != "42" {
		t.Errorf("shadow would-deny: got %+v, want one flagged denial by watch for user 42", got)
	}

	// A refused cost is a 400, not a bucket's denial.
	got = nil
	if w := serve(l, r("/cost", "X-Cost", "4")); w.Code != http.StatusBadRequest {
		t.Fatalf("cost above max_cost: status %d, want 400", w.Code)
	}
	if len(got) != 0 {
		t.Errorf("a refused cost was reported as a denial: %+v", got)
	}
	// A cost above the burst is denied for good, and says so.
	if w := serve(l, r("/cost", "X-Cost", "3")); w.Code != 200 {
		t.Fatalf("cost 3 of 5: status %d", w.Code)
	}
	if w := serve(l, r("/cost", "X-Cost", "3")); w.Code != 429 {
		t.Fatalf("cost 3 of 2 left: status %d", w.Code)
	}
	if len(got) != 1 || got[0].Remaining != 2 || got[0].Cost != 3 || got[0].Identity != "" || got[0].Key != "/cost" {
		t.Errorf("denial of cost 3 with 2 left: got %+v", got)
	}
}

// The check API reports the address the request described, and a denied
// check costs no more allocations with OnDeny set than without.
func TestOnDenyCheckAPIAndAllocs(t *testing.T) {
	var last httplimit.Denial
	n := 0
	on := httplimit.Options{OnDeny: func(d httplimit.Denial) { last = d; n++ }}
	doc := `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":0.001,"burst":1}}]}`
	lOn, _ := newLimiter(t, doc, on)
	lOff, _ := newLimiter(t, doc, httplimit.Options{})
	body := `{"ip":"198.51.100.7","method":"DELETE","path":"/v"}`
	for range 2 {
		lOn.CheckHandler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/check", strings.NewReader(body)))
	}
	if n != 1 || last.ClientIP != netip.MustParseAddr("198.51.100.7") || last.Method != "DELETE" || last.Path != "/v" {
		t.Errorf("check API denial: %d calls, last %+v", n, last)
	}
	allocs := func(l *httplimit.Middleware) float64 {
		h := l.Handler(okHandler)
		r := req("192.0.2.9:1", "/")
		rw := httptest.NewRecorder()
		h.ServeHTTP(rw, r) // the one admission
		return testing.AllocsPerRun(200, func() {
			clear(rw.Header())
			h.ServeHTTP(rw, r)
		})
	}
	off, onA := allocs(lOff), allocs(lOn)
	// Under the race detector sync.Pool drops a random share of what is put
	// back (here and in fmt and encoding/json), so counts vary run to run.
	if onA > off && !raceEnabled {
		t.Errorf("a denied request allocates %v times with OnDeny, %v without", onA, off)
	}
	if n < 200 {
		t.Errorf("OnDeny called %d times over 200 denied requests", n)
	}
}
