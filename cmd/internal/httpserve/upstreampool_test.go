package httpserve

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// listenAndDiscard accepts connections on loopback and holds them open
// until the test ends; it returns the address and a count of accepted
// connections.
func listenAndDiscard(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
}

// TestUpstreamPoolKeepsTheNewest: the most recently put connection is
// taken first, at most maxIdle wait, the sweep closes those idle too long
// (the oldest), and a closed pool keeps none.
func TestUpstreamPoolKeepsTheNewest(t *testing.T) {
	addr, _ := listenAndDiscard(t)
	p := newUpstreamPool(addr, &net.Dialer{Timeout: time.Second}, 3, time.Hour)
	defer p.close()
	ctx := context.Background()
	var cs []*upstreamConn
	for range 5 {
		c, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.reused {
			t.Fatal("a new connection is marked reused")
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		p.put(c)
	}
	if n := p.idleCount(); n != 3 {
		t.Fatalf("%d idle after putting 5 with maxIdle 3, want 3", n)
	}
	if _, err := cs[3].Write([]byte("x")); err == nil {
		t.Error("the connection put beyond maxIdle is still open")
	}
	if c := p.takeIdle(); c != cs[2] || !c.reused {
		t.Fatalf("took %p (reused %v), want the last kept, %p", c, c.reused, cs[2])
	}
	p.put(cs[2])
	// Age the oldest kept one: the sweep closes it alone.
	p.mu.Lock()
	p.idle[0].idleSince = time.Now().Add(-2 * time.Hour)
	p.mu.Unlock()
	p.closeIdle(time.Now().Add(-time.Hour))
	if n := p.idleCount(); n != 2 {
		t.Fatalf("%d idle after the sweep, want 2", n)
	}
	if _, err := cs[0].Write([]byte("x")); err == nil {
		t.Error("the swept connection is still open")
	}
	p.close()
	if n := p.idleCount(); n != 0 {
		t.Fatalf("%d idle after close", n)
	}
	c, err := p.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.put(c)
	if n := p.idleCount(); n != 0 {
		t.Fatalf("a closed pool kept a connection put back")
	}
}

// TestUpstreamPoolUnderAFlood: many requests at once open as many
// connections as they need, and afterwards no more than maxIdle stay
// open.
func TestUpstreamPoolUnderAFlood(t *testing.T) {
	addr, _ := listenAndDiscard(t)
	p := newUpstreamPool(addr, &net.Dialer{Timeout: time.Second}, 8, time.Hour)
	defer p.close()
	var wg sync.WaitGroup
	got := make(chan *upstreamConn, 64)
	for range 64 {
		wg.Go(func() {
			c, err := p.get(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			got <- c
		})
	}
	wg.Wait()
	close(got)
	var all []*upstreamConn
	for c := range got {
		all = append(all, c)
	}
	for _, c := range all {
		p.put(c)
	}
	if n := p.idleCount(); n != 8 {
		t.Errorf("%d idle, want maxIdle 8", n)
	}
	open := 0
	for _, c := range all {
		c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("x")); err == nil {
			open++
		}
	}
	if open != 8 || len(all) != 64 {
		t.Errorf("%d of %d connections open after the flood, want 8", open, len(all))
	}
}
