package httpserve

import "testing"

// TestCopyBuffers: Get hands out whole buffers, and a slice of another size
// put back is dropped rather than pooled as a buffer it is not.
func TestCopyBuffers(t *testing.T) {
	var p copyBuffers
	b := p.Get()
	if len(b) != copyBufferSize {
		t.Fatalf("Get: %d bytes, want %d", len(b), copyBufferSize)
	}
	p.Put(b)
	p.Put(make([]byte, 10))
	p.Put(b[:100])
	for range 100 {
		if got := len(p.Get()); got != copyBufferSize {
			t.Fatalf("Get after a short Put: %d bytes", got)
		}
	}
}
