package main

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/faucetgo/faucet/httplimit"
)

// The floor answers as faucet serve's built-in rule does when it denies:
// the same status, header fields and body, byte for byte, so that the two
// write as much. (The rule is serve's default: per IP, 5 a second, bursts
// of 10.)
func TestDenyWritesServesDenial(t *testing.T) {
	lim, err := httplimit.New([]httplimit.Rule{{Name: "per-ip", LimitKeys: []string{"ip:address"}, Rate: 5, Burst: 10}}, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	var want *httptest.ResponseRecorder
	// The burst of 10 passes; a refill between two requests lets one more
	// through, so ask until one is denied.
	for range 100 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/x", nil)
		r.RemoteAddr = "192.0.2.7:4711"
		h.ServeHTTP(w, r)
		if w.Code == http.StatusTooManyRequests {
			want = w
			break
		}
	}
	if want == nil {
		t.Fatal("the rule denied none of 100 requests")
	}

	got := httptest.NewRecorder()
	deny(got, httptest.NewRequest("GET", "/x", nil))
	if got.Code != want.Code {
		t.Errorf("status %d, want %d", got.Code, want.Code)
	}
	if g, w := got.Header(), want.Header(); !maps.EqualFunc(g, w, slices.Equal) {
		t.Errorf("header\n%v\nwant\n%v", g, w)
	}
	if g, w := got.Body.String(), want.Body.String(); g != w {
		t.Errorf("body\n%s\nwant\n%s", g, w)
	}
}
