package main

import (
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
)

// newProxy is a reverse proxy to u that tells it the client's address in
// X-Forwarded-For: appended to the incoming header when the request comes
// from a trusted proxy, replacing it otherwise (a client's own header is
// not passed on as if it were true).
func (s *server) newProxy(u *url.URL, trusted []netip.Prefix) *httputil.ReverseProxy {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 1024
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			if ap, err := netip.ParseAddrPort(pr.In.RemoteAddr); err == nil {
				for _, p := range trusted {
					if p.Contains(ap.Addr().Unmap()) {
						pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
						break
					}
				}
			}
			pr.SetXForwarded()
		},
		Transport: t,
		ErrorLog:  s.errorLog("proxy"),
	}
}
