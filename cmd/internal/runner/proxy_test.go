package runner

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
)

// copyBufferSize is the size of httpserve's copy buffers, which the bodies
// below are many times.
const copyBufferSize = 32 << 10

// TestProxyCopiesBodiesThroughPooledBuffers: responses many times the size
// of a copy buffer, proxied concurrently, arrive byte for byte, so no two
// requests ever share a buffer and a buffer put back is never still in use.
func TestProxyCopiesBodiesThroughPooledBuffers(t *testing.T) {
	bodies := make([][]byte, 8)
	for i := range bodies {
		bodies[i] = make([]byte, 5*copyBufferSize+i*1001)
		r := rand.New(rand.NewPCG(uint64(i), 1))
		for j := range bodies[i] {
			bodies[i][j] = byte(r.Uint32())
		}
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := bodies[len(r.URL.Path)%len(bodies)]
		for len(b) > 0 { // in pieces, so the proxy copies many times
			n := min(len(b), 7000)
			w.Write(b[:n])
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	}))
	defer upstream.Close()
	rules := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, rules, `{"rules":[{"name":"per-ip","limit_keys":["ip:address"],"algorithm_config":{"rps":1000,"burst":1000}}]}`)
	s := newTestServer(t, io.Discard, nil, "--upstream", upstream.URL, "--rules", rules)
	front := httptest.NewServer(s.public)
	defer front.Close()

	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			path := "/" + string(bytes.Repeat([]byte("x"), i%len(bodies)))
			resp, err := http.Get(front.URL + path)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(got, bodies[len(path)%len(bodies)]) {
				t.Errorf("%s: %d bytes, err %v: not the upstream's body", path, len(got), err)
			}
		})
	}
	wg.Wait()
}
