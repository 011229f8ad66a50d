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
