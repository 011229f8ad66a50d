package main

import (
	"io"
	"net/http"
	"strconv"
)

// denyBody is the problem body faucet serve's built-in rule writes with a
// 429, byte for byte.
const denyBody = `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"Rule \"per-ip\" allows 5 tokens per second with bursts of 10; retry after 1 s.","violated-policies":["per-ip"],"reason":"token_bucket_exceeded"}` + "\n"

// denyHeader is the header fields faucet serve's built-in rule writes with
// a 429, in http.Header's canonical form. The values are shared by every
// response: net/http only reads them.
var denyHeader = http.Header{
	"Cache-Control":    {"no-store"},
	"Content-Length":   {strconv.Itoa(len(denyBody))},
	"Content-Type":     {"application/problem+json"},
	"Ratelimit":        {`"per-ip";r=0;t=1`},
	"Ratelimit-Policy": {`"per-ip";q=10;w=2`},
	"Retry-After":      {"1"},
	"X-Faucet-Reason":  {"token_bucket_exceeded"},
}

// deny answers every request with faucet serve's 429, pre-rendered, and
// consults no limiter: the least a Go server does to deny a request, the
// floor under faucet serve's denial.
func deny(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	for k, v := range denyHeader {
		h[k] = v
	}
	w.WriteHeader(http.StatusTooManyRequests)
	io.WriteString(w, denyBody)
}
