package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// valueRules key one rule on a header, one on a query parameter, limit
// POSTs by method, and read a cost from a header (one bucket per path);
// every bucket holds 1 token (the cost rule's 10) and refills in 1000 s.
const valueRules = `{"rules":[
 {"name":"per-key","limit_keys":["header:x-api-key"],"match":{"path_prefix":"/h/"},"algorithm_config":{"rps":0.001,"burst":1}},
 {"name":"per-param","limit_keys":["query:k"],"match":{"path_prefix":"/q/"},"algorithm_config":{"rps":0.001,"burst":1}},
 {"name":"posts","limit_keys":["ip:address"],"match":{"path_prefix":"/m/","method":"POST"},"algorithm_config":{"rps":0.001,"burst":1}},
 {"name":"weighted","limit_keys":["path"],"match":{"path_prefix":"/c/"},"algorithm_config":{"rps":0.01,"burst":10,"cost_source":"header:x-cost"}}]}`

// Two values for a limit key ("X-Api-Key: rnd<i>" then "X-Api-Key:
// victim"), keyed on the first and forwarded, would let an upstream reading
// the last line serve the victim's key past its burst of 1. Each shape
// that lets the upstream read another value than the limiter is answered
// 400 ambiguous_value (a malformed cost 400 invalid_cost), and none
// reaches the upstream.
func TestAttackRepeatedKeyValues(t *testing.T) {
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "upstream")
	}))
	defer upstream.Close()
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, valueRules)
	p := startServe(t, "--rules", rules, "--upstream", upstream.URL)

	// Each request carries a fresh value (rnd<shape>-<i>), so that on a
	// build that keys on it every request finds a full bucket.
	shapes := []struct {
		name, method, target string
		headers              []string
		reason               string
	}{
		{"two lines", "GET", "/h/x", []string{"X-Api-Key", "RND", "X-Api-Key", "victim"}, "ambiguous_value"},
		{"comma list", "GET", "/h/x", []string{"X-Api-Key", "RND, victim"}, "ambiguous_value"},
		{"underscore", "GET", "/h/x", []string{"X-Api-Key", "RND", "X_Api_Key", "victim"}, "ambiguous_value"},
		{"underscore alone", "GET", "/h/x?i=RND", []string{"X_Api_Key", "victim"}, "ambiguous_value"},
		{"hop-by-hop", "GET", "/h/x", []string{"X-Api-Key", "RND", "Connection", "X-Api-Key"}, "ambiguous_value"},
		{"repeated param", "GET", "/q/x?k=RND&k=victim", nil, "ambiguous_value"},
		{"param case", "GET", "/q/x?k=RND&K=victim", nil, "ambiguous_value"},
		{"param semicolon", "GET", "/q/x?k=RND;k=victim", nil, "ambiguous_value"},
		{"param bad escape", "GET", "/q/x?k=RND&k%zz=victim", nil, "ambiguous_value"},
		{"param php array", "GET", "/q/x?k=RND&k[]=victim", nil, "ambiguous_value"},
		{"param php nul", "GET", "/q/x?k=RND&k%00x=victim", nil, "ambiguous_value"},
		{"method override", "GET", "/m/x", []string{"X-HTTP-Method-Override", "POST"}, "ambiguous_value"},
		{"cost plus", "GET", "/c/RND", []string{"X-Cost", "+50"}, "invalid_cost"},
		{"cost exponent", "GET", "/c/RND", []string{"X-Cost", "5e1"}, "invalid_cost"},
		{"cost hex", "GET", "/c/RND", []string{"X-Cost", "0x32"}, "invalid_cost"},
		{"cost twice", "GET", "/c/RND", []string{"X-Cost", "1", "X-Cost", "50"}, "ambiguous_value"},
	}
	for si, s := range shapes {
		before := hits.Load()
		admitted, denied, refused := 0, 0, 0
		for i := range 10 {
			rnd := fmt.Sprintf("rnd%d-%d", si, i)
			headers := slices.Clone(s.headers)
			for j := range headers {
				headers[j] = strings.ReplaceAll(headers[j], "RND", rnd)
			}
			resp, body := sendLines(t, s.method, p.url(strings.ReplaceAll(s.target, "RND", rnd)), headers...)
			switch {
			case resp.StatusCode == 200:
				admitted++
			case resp.StatusCode == 429:
				denied++
			case resp.StatusCode == 400 && resp.Header.Get("X-Faucet-Reason") == s.reason && strings.Contains(body, `"reason":"`+s.reason+`"`):
				refused++
			default:
				t.Errorf("%s %d: %d %q", s.name, i, resp.StatusCode, body)
			}
		}
		reached := hits.Load() - before
		t.Logf("%s: of 10, %d admitted (%d reached the upstream), %d denied, %d refused with 400 %s", s.name, admitted, reached, denied, refused, s.reason)
		if admitted != 0 || reached != 0 || refused != 10 {
			t.Errorf("%s: %d of 10 admitted, %d reached the upstream; want all 10 refused with 400 %s", s.name, admitted, reached, s.reason)
		}
	}
	// Nothing was taken from the victim: its one token is still there,
	// and the limit still holds for it.
	if resp, _ := get(t, p.url("/h/x"), "X-Api-Key", "victim"); resp.StatusCode != 200 {
		t.Errorf("the victim's first request: %d, want 200", resp.StatusCode)
	}
	if resp, _ := get(t, p.url("/h/x"), "X-Api-Key", "victim"); resp.StatusCode != 429 {
		t.Errorf("the victim's second request: %d, want 429 (burst 1)", resp.StatusCode)
	}
	if n := metric(t, p, `faucet_decisions_total{result="refused",rule="per-key"}`); n != 50 {
		t.Errorf("per-key refusals counted: %v, want 50", n)
	}

	// The check API takes one value per name, but a caller that joined
	// repeated lines, or passes a second spelling, is refused the same way.
	c := startServe(t, "--rules", rules)
	for _, body := range []string{
		`{"path":"/h/x","headers":{"X-Api-Key":"rnd%d, victim"}}`,
		`{"path":"/h/x","headers":{"X-Api-Key":"rnd%d","X_Api_Key":"victim"}}`,
		`{"path":"/q/x","query":{"k":"rnd%d","K":"victim"}}`,
		`{"path":"/m/x","method":"GET","headers":{"X-Http-Method-Override":"POST","X-I":"%d"}}`,
	} {
		admitted := 0
		for i := range 10 {
			_, out := postCheck(t, c, fmt.Sprintf(body, i))
			if out.Allowed {
				admitted++
			} else if out.Status != 400 || out.Reason != "ambiguous_value" {
				t.Errorf("check %s: %+v, want 400 ambiguous_value", body, out)
			}
		}
		t.Logf("check API %s: %d of 10 allowed", body, admitted)
		if admitted != 0 {
			t.Errorf("check API %s: %d of 10 allowed, want none", body, admitted)
		}
	}
}

// sendLines makes one request with headers as name, value pairs, each added as
// its own line.
func sendLines(t *testing.T, method, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header[headers[i]] = append(r.Header[headers[i]], headers[i+1])
	}
	resp, err := testClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// A shadow rule in the response fields ("per-ip";r=0;t=1 once its bucket
// is empty) would make a client honouring them back off for a rule that
// denies nothing: with the example rules, whose per-ip rule is in shadow
// mode, it is only in the metrics and the log, unless --headers names
// shadow.
func TestAttackShadowRuleHeaders(t *testing.T) {
	t.Setenv(jwtSecretEnv, "an HS256 secret of at least 32 bytes, for tests") // the example's claims need verifying
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upstream") }))
	defer upstream.Close()
	p := startServe(t, "--rules", "rules.example.json", "--upstream", upstream.URL)
	shown := 0
	for i := range 15 {
		resp, _ := get(t, p.url("/x"), "X-Api-Key", fmt.Sprint("key", i))
		fields := resp.Header.Get("RateLimit-Policy") + " " + resp.Header.Get("RateLimit") + " " + resp.Header.Get("X-Faucet-Reason")
		if resp.StatusCode != 200 || !strings.Contains(fields, `"free"`) {
			t.Errorf("request %d: %d %q, want 200 with the free rule's items", i, resp.StatusCode, fields)
		}
		if strings.Contains(fields, "per-ip") || strings.Contains(fields, "shadow") {
			shown++
			if shown == 1 || i == 14 {
				t.Logf("request %d: %s", i, fields)
			}
		}
	}
	if shown != 0 {
		t.Errorf("%d of 15 responses carried the shadow rule's items or reason, want none", shown)
	}
	if n := metric(t, p, `faucet_decisions_total{result="shadow_denied",rule="per-ip"}`); n < 1 {
		t.Errorf("shadow denials counted: %v, want at least 1 (15 requests on a burst of 10)", n)
	}

	// Opted in, they show.
	o := startServe(t, "--rules", "rules.example.json", "--upstream", upstream.URL, "--headers", "draft,shadow")
	resp, _ := get(t, o.url("/x"), "X-Api-Key", "k")
	if got := resp.Header.Get("RateLimit-Policy"); !strings.Contains(got, `"per-ip";q=10;w=2`) {
		t.Errorf("--headers draft,shadow: RateLimit-Policy %q, want the per-ip item", got)
	}
}

// Go's ServeMux, Express, Rails, Django and Flask serve a HEAD with the
// GET handler, and Django and Flask upper-case the method, so a rule on GET
// (burst 1) that let HEAD by, or one on POST that let "post" by, would
// leave the limited handler unlimited. A HEAD takes the GET bucket, and a
// method with a lower-case letter is refused where a rule reads the
// method.
func TestAttackMethodSpellings(t *testing.T) {
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer upstream.Close()
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[
	 {"name":"gets","limit_keys":["ip:address"],"match":{"path_prefix":"/g/","method":"GET"},"algorithm_config":{"rps":0.001,"burst":1}},
	 {"name":"posts","limit_keys":["ip:address"],"match":{"path_prefix":"/p/","method":"POST"},"algorithm_config":{"rps":0.001,"burst":1}}]}`)
	p := startServe(t, "--rules", rules, "--upstream", upstream.URL)
	for _, s := range []struct{ method, path string }{{"HEAD", "/g/x"}, {"post", "/p/x"}, {"Post", "/p/x"}} {
		before := hits.Load()
		codes := map[int]int{}
		for range 5 {
			c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: faucet\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", s.method, s.path)
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: s.method})
			c.Close()
			if err != nil {
				t.Fatalf("%s %s: %v", s.method, s.path, err)
			}
			codes[resp.StatusCode]++
		}
		reached := hits.Load() - before
		t.Logf("%s %s, 5 times: statuses %v, %d reached the upstream", s.method, s.path, codes, reached)
		if reached > 1 {
			t.Errorf("%s %s: %d of 5 reached the upstream under a rule of burst 1", s.method, s.path, reached)
		}
	}
	// The HEAD took the GET's token.
	if resp, _ := get(t, p.url("/g/x")); resp.StatusCode != 429 {
		t.Errorf("GET after HEAD: %d, want 429", resp.StatusCode)
	}
}

// Go's server moves the Host header to Request.Host, where a rule matching
// or keyed on header:host must read it, or a vhost rule of burst 1 would
// never apply and every host would share one bucket. The rules read the
// host as nginx matches a server name: lower case, without the port or a
// trailing dot, and from the absolute-form target when given.
func TestAttackHostRules(t *testing.T) {
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer upstream.Close()
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[
	 {"name":"vhost","limit_keys":["ip:address"],"match":{"header:host":"api.example.com"},"algorithm_config":{"rps":0.001,"burst":1}},
	 {"name":"per-host","limit_keys":["header:host"],"match":{"path_prefix":"/k/"},"algorithm_config":{"rps":0.001,"burst":1}}]}`)
	p := startServe(t, "--rules", rules, "--upstream", upstream.URL)
	send := func(target, host string) int {
		c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET %s Host %s: %v", target, host, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	admitted := 0
	for _, s := range [][2]string{{"/x", "api.example.com"}, {"/x", "API.example.com"}, {"/x", "api.example.com:80"},
		{"/x", "api.example.com."}, {"http://api.example.com/x", "other.example"}, {"/x", "Api.Example.Com:8080"}} {
		if send(s[0], s[1]) == 200 {
			admitted++
		}
	}
	t.Logf("6 requests for api.example.com under a vhost rule of burst 1: %d admitted", admitted)
	if admitted != 1 {
		t.Errorf("%d of 6 requests for api.example.com admitted, want 1 (the burst)", admitted)
	}
	// Keyed on the host: a bucket per host.
	a, b := send("/k/x", "a.example"), send("/k/x", "b.example")
	t.Logf("per-host rule, burst 1: a.example %d, then b.example %d", a, b)
	if a != 200 || b != 200 {
		t.Errorf("per-host rule: a.example %d, b.example %d, want 200 each (a bucket each)", a, b)
	}
}
