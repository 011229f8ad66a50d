package shard

import (
	"sync"
	"testing"

	"github.com/faucetgo/faucet/fixedpoint"
)

func TestTakeOnTombIsNotLive(t *testing.T) {
	l := layout(t)
	b := newBucket("k", uint64(l.Full(0, 0)))
	var ref Ref
	if _, live := b.Take(l, &ref, fixedpoint.Instant{}, 1000); !live {
		t.Fatal("live bucket reported dead")
	}
	b.CompareAndSwap(b.Load(), fixedpoint.Tomb)
	s, live := b.Take(l, &ref, fixedpoint.Instant{}, 1000)
	if live || s.Allowed || b.Load() != fixedpoint.Tomb {
		t.Fatalf("take on a tomb: live=%v step=%+v word=%x", live, s, b.Load())
	}
	if _, _, live := b.Peek(l, &ref, fixedpoint.Instant{}); live {
		t.Fatal("peek on a tomb reported live")
	}
}

// Ref.Cover keeps the reference within RefStep below every covered tick and
// never lowers it.
func TestRefCover(t *testing.T) {
	l := layout(t)
	var ref Ref
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				tick := int64(g*1000+i) * l.RefStep / 3
				ref.Cover(l, ref.Load(), tick)
				if ref.Load() < tick-l.RefStep {
					t.Errorf("ref %d more than RefStep below %d", ref.Load(), tick)
					return
				}
			}
		})
	}
	wg.Wait()
	if max := int64(7999) * l.RefStep / 3; ref.Load() > max {
		t.Errorf("ref %d above the largest covered tick %d", ref.Load(), max)
	}
}

// HasKey must agree with string equality for every length, including the
// 8..16-byte fast path and its boundaries, and for a difference at every
// byte position (the two words it compares overlap for short keys).
func TestHasKeyMatchesStringEquality(t *testing.T) {
	for n := range 24 {
		key := make([]byte, n)
		for i := range key {
			key[i] = byte('a' + i)
		}
		b := newBucket(string(key), 0)
		if !b.HasKey(string(key)) {
			t.Errorf("len %d: own key not found", n)
		}
		for i := range n {
			other := append([]byte(nil), key...)
			other[i] ^= 0x20
			if b.HasKey(string(other)) {
				t.Errorf("len %d: key differing at byte %d matched", n, i)
			}
		}
		if b.HasKey(string(key) + "x") {
			t.Errorf("len %d: longer key matched", n)
		}
		if n > 0 && b.HasKey(string(key[:n-1])) {
			t.Errorf("len %d: shorter key matched", n)
		}
	}
	long := string(make([]byte, 1<<16))
	if b := newBucket(long, 0); !b.HasKey(long) || b.HasKey(long[1:]) {
		t.Error("64 KiB key: HasKey disagrees with ==")
	}
}
