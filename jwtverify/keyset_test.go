package jwtverify_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/httplimit"
	"github.com/faucetgo/faucet/jwtverify"
)

// errorLog collects OnRefreshError's errors.
type errorLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err.Error())
}

func (l *errorLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}

// A key set file is re-read in the background: a key added is trusted, a
// key removed is not, a broken file leaves the keys in force and is reported
// once.
func TestKeySetFileRotation(t *testing.T) {
	a, b := newECSigner(t, "a"), newECSigner(t, "b")
	var log errorLog
	v, path := fileVerifier(t, jwtverify.Config{RefreshInterval: 100 * time.Millisecond, OnRefreshError: log.add}, a)
	tokA, tokB := a.sign(t, claims(nil)), b.sign(t, claims(nil))
	if _, err := v.VerifyJWT(tokB); !errors.Is(err, httplimit.ErrJWTSignature) {
		t.Fatalf("a key not yet in the file: %v, want a signature error", err)
	}
	writeFile(t, path, keySet(t, a, b))
	eventually(t, "the added key b verifies", func() bool { _, err := v.VerifyJWT(tokB); return err == nil })
	writeFile(t, path, keySet(t, b))
	eventually(t, "the removed key a is refused", func() bool { _, err := v.VerifyJWT(tokA); return err != nil })

	writeFile(t, path, []byte(`{"keys": [`))
	eventually(t, "the broken file is reported", func() bool { return len(log.list()) == 1 })
	os.Remove(path)
	eventually(t, "the missing file is reported", func() bool { return len(log.list()) == 2 })
	time.Sleep(500 * time.Millisecond) // five more failed reads
	got := log.list()
	if len(got) != 2 || !strings.Contains(got[0], "JWKSFile: not a JSON Web Key Set") || !strings.Contains(got[1], "no such file") ||
		!strings.HasSuffix(got[1], "; keeping the keys in force") {
		t.Errorf("refresh errors %q, want the broken file and the missing one, once each", got)
	}
	if _, err := v.VerifyJWT(tokB); err != nil {
		t.Errorf("after failed reloads, the keys in force: %v", err)
	}
}

// keyServer serves a key set on 127.0.0.1 and counts the fetches.
type keyServer struct {
	*httptest.Server
	doc     atomic.Pointer[[]byte]
	delay   atomic.Int64 // nanoseconds before answering
	status  atomic.Int32 // 0: 200
	fetches atomic.Int64
}

func newKeyServer(t *testing.T, doc []byte) *keyServer {
	s := &keyServer{}
	s.doc.Store(&doc)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		time.Sleep(time.Duration(s.delay.Load()))
		if code := s.status.Load(); code != 0 {
			w.WriteHeader(int(code))
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(*s.doc.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *keyServer) set(doc []byte) { s.doc.Store(&doc) }

// A token naming a key ID the set lacks makes the verifier fetch the set
// again, without making the request wait, and at most every
// MinRefreshInterval however many such tokens come.
func TestKeySetURLUnknownKeyRefresh(t *testing.T) {
	a, b := newECSigner(t, "a"), newECSigner(t, "b")
	srv := newKeyServer(t, keySet(t, a))
	const minRefresh = 200 * time.Millisecond
	v := newVerifier(t, jwtverify.Config{JWKSURL: srv.URL + "/jwks", RefreshInterval: time.Hour, MinRefreshInterval: minRefresh})
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches by New, want 1", n)
	}
	// The rotation: b is published, and the server is slow.
	srv.set(keySet(t, a, b))
	srv.delay.Store(int64(500 * time.Millisecond))
	time.Sleep(minRefresh) // so that the first unknown ID fetches at once
	tokB := b.sign(t, claims(nil))
	start := time.Now()
	if _, err := v.VerifyJWT(tokB); !errors.Is(err, httplimit.ErrJWTSignature) {
		t.Fatalf("a key not yet fetched: %v, want a signature error", err)
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("VerifyJWT waited %v for the fetch; requests must not", d)
	}
	eventually(t, "the rotated key b verifies", func() bool { _, err := v.VerifyJWT(tokB); return err == nil })
	srv.delay.Store(0)

	// A flood of made-up key IDs.
	before, start := srv.fetches.Load(), time.Now()
	for i := 0; time.Since(start) < time.Second; i++ {
		v.VerifyJWT(signer{fmt.Sprintf("made-up-%d", i), b.method, b.priv}.sign(t, claims(nil)))
	}
	time.Sleep(minRefresh) // a fetch still due
	elapsed := time.Since(start)
	if n, most := srv.fetches.Load()-before, int64(elapsed/minRefresh)+1; n > most || n < 2 {
		t.Errorf("%d fetches in %v of unknown key IDs; want at least 2, at most %d (one per %v)", n, elapsed, most, minRefresh)
	}
}

// The set is fetched again every RefreshInterval: a key withdrawn stops
// verifying; a failing server leaves the keys in force.
func TestKeySetURLPeriodicRefresh(t *testing.T) {
	a, b := newECSigner(t, "a"), newECSigner(t, "b")
	srv := newKeyServer(t, keySet(t, a, b))
	var log errorLog
	v := newVerifier(t, jwtverify.Config{JWKSURL: srv.URL, RefreshInterval: 100 * time.Millisecond, OnRefreshError: log.add})
	tokA, tokB := a.sign(t, claims(nil)), b.sign(t, claims(nil))
	if _, err := v.VerifyJWT(tokA); err != nil {
		t.Fatal(err)
	}
	srv.set(keySet(t, b))
	eventually(t, "the withdrawn key a is refused", func() bool { _, err := v.VerifyJWT(tokA); return err != nil })
	srv.status.Store(http.StatusServiceUnavailable)
	eventually(t, "the failing server is reported", func() bool { return len(log.list()) > 0 })
	if got := log.list()[0]; !strings.Contains(got, "status 503 Service Unavailable, want 200") {
		t.Errorf("refresh error %q", got)
	}
	if _, err := v.VerifyJWT(tokB); err != nil {
		t.Errorf("while the server fails, the keys in force: %v", err)
	}
}

// A key set URL that cannot give a usable set fails New, naming the field.
func TestKeySetURLFailures(t *testing.T) {
	a := newECSigner(t, "a")
	big := append([]byte(`{"keys":[],"padding":"`), strings.Repeat("x", 1<<20)...)
	for _, tt := range []struct {
		name    string
		doc     []byte
		status  int32
		delay   time.Duration
		path    string
		timeout time.Duration
		want    string
	}{
		{name: "larger than 1 MiB", doc: append(big, `"}`...), want: "JWKSURL: the key set is larger than 1048576 bytes"},
		{name: "not found", status: 404, doc: keySet(t, a), want: "status 404 Not Found, want 200"},
		{name: "too slow", delay: time.Second, timeout: 100 * time.Millisecond, doc: keySet(t, a), want: "context deadline exceeded"},
		{name: "not a key set", doc: []byte(`<html>`), want: "JWKSURL: not a JSON Web Key Set"},
		{name: "only an HMAC key", doc: []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}`), want: "JWKSURL: the key set has no RSA, EC or Ed25519 signing key"},
		{name: "a broken key", doc: []byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA","kid":"bad"}]}`), want: `JWKSURL: key 0 (kid "bad"):`},
		{name: "redirected to plain http", path: "/redirect", doc: keySet(t, a), want: `redirected: must be an https:// URL (http:// only to a loopback address), got "http://idp.invalid/jwks"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newKeyServer(t, tt.doc)
			srv.status.Store(tt.status)
			srv.delay.Store(int64(tt.delay))
			mux := http.NewServeMux()
			mux.Handle("/", srv.Config.Handler)
			mux.Handle("/redirect", http.RedirectHandler("http://idp.invalid/jwks", http.StatusFound))
			srv.Config.Handler = mux
			start := time.Now()
			v, err := jwtverify.New(jwtverify.Config{JWKSURL: srv.URL + tt.path, FetchTimeout: tt.timeout})
			if err == nil {
				v.Close()
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), tt.want) || !errors.Is(err, jwtverify.ErrInvalidConfig) {
				t.Errorf("error %q, want one with %q wrapping ErrInvalidConfig", err, tt.want)
			}
			if tt.timeout > 0 && time.Since(start) > tt.delay {
				t.Errorf("New took %v with a FetchTimeout of %v", time.Since(start), tt.timeout)
			}
		})
	}
}

// Over TLS, with the caller's HTTP client.
func TestKeySetURLOverTLS(t *testing.T) {
	a := newECSigner(t, "a")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(keySet(t, a)) }))
	defer srv.Close()
	v := newVerifier(t, jwtverify.Config{JWKSURL: srv.URL, HTTPClient: srv.Client()})
	if _, err := v.VerifyJWT(a.sign(t, claims(nil))); err != nil {
		t.Error(err)
	}
}
