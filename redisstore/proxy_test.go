package redisstore

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/redisstore/redistest"
)

// slowProxy forwards loopback TCP to a server and holds every chunk of the
// server's replies for a delay the test sets: a slow network or a slow
// server, without the server blocking.
type slowProxy struct {
	ln    net.Listener
	delay atomic.Int64 // nanoseconds

	mu   sync.Mutex
	sent []byte // every byte forwarded to the server; guarded by mu
}

// forwarded reports whether the bytes of s have been forwarded to the
// server.
func (p *slowProxy) forwarded(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Contains(p.sent, []byte(s))
}

func newSlowProxy(t *testing.T, target string) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() {
				defer s.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, werr := s.Write(buf[:n]); werr != nil {
							return
						}
						p.mu.Lock()
						p.sent = append(p.sent, buf[:n]...)
						p.mu.Unlock()
					}
					if err != nil {
						return
					}
				}
			}()
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						time.Sleep(time.Duration(p.delay.Load()))
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *slowProxy) addr() string { return p.ln.Addr().String() }

// TestSlowResponses: replies slower than the deadline are failures answered
// by the policy (and the breaker opens after BreakAfter of them); replies
// slower than usual but within the deadline give the store's exact
// decisions.
func TestSlowResponses(t *testing.T) {
	s := redistest.Start(t)
	p := newSlowProxy(t, s.Addr())
	c := newRue(t, p.addr())
	slow, err := New(c, Config{Limit: 1.0 / 3600, Burst: 10, Prefix: "slow:", Timeout: 5 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	impatient, err := New(c, Config{Limit: 1.0 / 3600, Burst: 10, Prefix: "imp:", Timeout: 200 * time.Millisecond,
		OnFailure: FailOpen, BreakAfter: 2, BreakFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p.delay.Store(int64(30 * time.Millisecond))
	if a, e := tally(slow, "k", 12); a != 10 || e != 0 {
		t.Fatalf("30 ms replies, 5 s deadline: %d allowed, %d errors of 12, want 10 and 0", a, e)
	}
	p.delay.Store(int64(time.Second))
	if a, e := tally(impatient, "k", 5); a != 5 || e != 5 {
		t.Fatalf("1 s replies, 200 ms deadline, fail-open: %d allowed, %d errors of 5, want 5 and 5", a, e)
	}
	if st := impatient.Stats(); st.Skipped != 3 || st.FailedOpen != 5 || st.Allowed != 0 {
		t.Fatalf("stats %+v: want 2 calls that timed out, then 3 skipped by the breaker", st)
	}
}
