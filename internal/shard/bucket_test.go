package shard

import (
	"sync"
	"testing"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

func fullWord(l *fixedpoint.Layout, tick int64) (fixedpoint.Epoch, fixedpoint.Word) {
	return l.PackNew(tick, l.Capacity())
}

// peek returns b's state at now without changing it; live is false if b is
// gone.
func peek(b *Bucket, l *fixedpoint.Layout, now fixedpoint.Instant) (at int64, tokens uint64, live bool) {
	w := b.load()
	if w == fixedpoint.Tomb {
		return 0, 0, false
	}
	_, at, tokens = l.Advance(w, b.base(l), now)
	return at, tokens, true
}

func TestTakeOnTombIsGone(t *testing.T) {
	l := layout(t)
	e, w := fullWord(l, 0)
	b := NewBucket(0, e, w)
	if _, st := b.Take(l, fixedpoint.Instant{}, 1000); st != Done {
		t.Fatalf("live bucket: status %d", st)
	}
	b.Tomb(b.load())
	s, st := b.Take(l, fixedpoint.Instant{}, 1000)
	if st != Gone || s.Allowed || b.load() != fixedpoint.Tomb {
		t.Fatalf("take on a tomb: status %d step %+v word %x", st, s, b.load())
	}
	if _, _, live := peek(b, l, fixedpoint.Instant{}); live {
		t.Fatal("peek on a tomb reported live")
	}
}

// An idle bucket is read exactly however far the clock has moved: its word
// resolves against its own epoch, not against other buckets' times.
func TestIdleBucketAfterAnyJump(t *testing.T) {
	l, err := fixedpoint.NewLayout(1e8, 10) // burst 1e5, 10 tokens/s: a span of 2.3 min
	if err != nil {
		t.Fatal(err)
	}
	e, w := fullWord(l, 0)
	b := NewBucket(0, e, w)
	if s, st := b.Take(l, fixedpoint.Instant{}, l.Capacity()); st != Done || !s.Allowed || s.Tokens != 0 {
		t.Fatalf("draining: %+v, %d", s, st)
	}
	for _, jump := range []int64{60e9, 1800e9, 30 * 3600e9, 30 * 86400e9} {
		now := l.At(jump)
		_, tokens, _ := peek(b, l, now)
		if want := min(l.Capacity(), uint64(jump/1e9*10*1000)); tokens != want {
			t.Errorf("after %d s: %d quanta, want %d", jump/1e9, tokens, want)
		}
	}
	// A take far past the span needs a later epoch, and writes nothing.
	s, st := b.Take(l, l.At(30*86400e9), 1000)
	if st != NeedsEpoch || !s.Allowed || b.load() != w-fixedpoint.Word(l.Capacity()) {
		t.Errorf("take a month later: %+v, status %d, word %x", s, st, b.load())
	}
}

// take takes cost quanta from key's bucket at now as the engine does,
// replacing the bucket when the result lies past its epoch's span.
func take(tab *Table, h uint64, key string, l *fixedpoint.Layout, now fixedpoint.Instant, cost uint64) (fixedpoint.Step, *Bucket) {
	b := tab.Lookup(h, key)
	for {
		s, st := b.Take(l, now, cost)
		if st == Done {
			return s, b
		}
		if st == Gone {
			// Replaced or moved: the lock-free lookup finds the new bucket,
			// or this tomb again until the new bucket is out; then look
			// under the mutex, as the engine does.
			nb := tab.Lookup(h, key)
			if nb == b {
				nb = tab.Current(h, key)
			}
			b = nb
			continue
		}
		w := b.load()
		if w == fixedpoint.Tomb {
			continue
		}
		s = l.Take(w, b.base(l), now, cost)
		if !s.NeedsEpoch(cost) {
			continue // it fits, or denies, by now
		}
		e := l.EpochOf(s.At)
		next, _ := l.Pack(l.Base(e), s.At, s.Tokens)
		if nb, ok := tab.Replace(h, key, b, w, Fixed{l}, 0, e, next); ok {
			return s, nb
		} else {
			b = nb
		}
	}
}

// Replace moves a take past its bucket's span into a bucket of a later epoch,
// tombs the old one, and leaves the index pointing at the new.
func TestReplace(t *testing.T) {
	l, _ := fixedpoint.NewLayout(1e8, 10)
	tab := NewTable(1, 1)
	h := Hash("k")
	old, _ := tab.Insert(h, "k", Fixed{l}, 0)
	far := l.At(30 * 86400e9)
	if _, st := old.Take(l, far, 1000); st != NeedsEpoch {
		t.Fatalf("status %d, want NeedsEpoch", st)
	}
	w := old.load()
	e := l.EpochOf(far.Tick)
	next, _ := l.Pack(l.Base(e), far.Tick, l.Capacity()-1000)
	if _, ok := tab.Replace(h, "k", old, w+1, Fixed{l}, 0, e, next); ok || old.load() != w {
		t.Fatal("Replace with a stale word succeeded")
	}
	nb, ok := tab.Replace(h, "k", old, w, Fixed{l}, 0, e, next)
	if !ok || nb == old || old.load() != fixedpoint.Tomb || tab.Lookup(h, "k") != nb {
		t.Fatalf("Replace: ok %v, new %p old %p (word %x), lookup %p", ok, nb, old, old.load(), tab.Lookup(h, "k"))
	}
	if at, tokens, _ := peek(nb, l, far); at != far.Tick || tokens != l.Capacity()-1000 {
		t.Errorf("new bucket holds %d at %d, want %d at %d", tokens, at, l.Capacity()-1000, far.Tick)
	}
	if keyOf(tab, nb) != "k" || nb.Epoch() != e {
		t.Errorf("new bucket: key %q epoch %d", keyOf(tab, nb), nb.Epoch())
	}
	// Replacing the replaced bucket fails and names the current one.
	if cur, ok := tab.Replace(h, "k", old, w, Fixed{l}, 0, e, next); ok || cur != nb {
		t.Errorf("Replace of a replaced bucket: ok %v, current %p", ok, cur)
	}
}

// Takes racing replacements on one key: every token is taken once, from the
// old bucket or the new, and none is lost or minted.
func TestReplaceRacingTakes(t *testing.T) {
	l, _ := fixedpoint.NewLayout(1e8, 10)
	tab := NewTable(1, 1)
	h := Hash("k")
	tab.Insert(h, "k", Fixed{l}, 0)
	far := l.At(30 * 86400e9) // full again, and past the first epoch's span
	const cost = 100_000      // 100 tokens: 1000 takes drain the bucket
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := uint64(0)
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				if s, _ := take(tab, h, "k", l, far, cost); s.Allowed {
					mu.Lock()
					taken += cost
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if taken != l.Capacity() {
		t.Errorf("took %d quanta at one instant from a full bucket of %d", taken, l.Capacity())
	}
}

// Update publishes f's word, leaves the word alone when f declines, and
// never calls f on a tomb.
func TestUpdate(t *testing.T) {
	l := layout(t)
	e, w := fullWord(l, 0)
	b := NewBucket(0, e, w)
	if orig, live := b.Update(func(orig fixedpoint.Word) (fixedpoint.Word, bool) { return orig - 1, true }); !live || orig != w || b.load() != w-1 {
		t.Fatalf("write: orig %x live %v word %x, want %x true %x", orig, live, b.load(), w, w-1)
	}
	if orig, live := b.Update(func(orig fixedpoint.Word) (fixedpoint.Word, bool) { return orig - 1, false }); !live || orig != w-1 || b.load() != w-1 {
		t.Fatalf("decline: orig %x live %v word %x, want %x true %x", orig, live, b.load(), w-1, w-1)
	}
	b.Tomb(b.load())
	called := false
	if orig, live := b.Update(func(orig fixedpoint.Word) (fixedpoint.Word, bool) { called = true; return orig, true }); live || called || orig != fixedpoint.Tomb {
		t.Fatalf("on a tomb: orig %x live %v, f called %v", orig, live, called)
	}
}

// A write that lands between Update's load and its CompareAndSwap makes f
// run again on the new word; one that tombs the bucket ends Update, gone.
func TestUpdateRetriesALostRace(t *testing.T) {
	l := layout(t)
	e, w := fullWord(l, 0)
	b := NewBucket(0, e, w)
	var seen []fixedpoint.Word
	orig, live := b.Update(func(orig fixedpoint.Word) (fixedpoint.Word, bool) {
		seen = append(seen, orig)
		if len(seen) == 1 {
			b.compareAndSwap(orig, orig-5) // another writer lands first
		}
		return orig - 1, true
	})
	if !live || orig != w-5 || b.load() != w-6 || len(seen) != 2 || seen[0] != w || seen[1] != w-5 {
		t.Fatalf("orig %x live %v word %x, f saw %x; want %x true %x, [%x %x]", orig, live, b.load(), seen, w-5, w-6, w, w-5)
	}
	if _, live := b.Update(func(orig fixedpoint.Word) (fixedpoint.Word, bool) {
		b.Tomb(orig) // evicted under the update
		return orig - 1, true
	}); live || b.load() != fixedpoint.Tomb {
		t.Fatalf("update racing a tomb: live %v word %x", live, b.load())
	}
}

func TestUpdateRefusesToWriteATomb(t *testing.T) {
	l := layout(t)
	e, w := fullWord(l, 0)
	b := NewBucket(0, e, w)
	defer func() {
		if recover() == nil || b.load() != w {
			t.Fatalf("Update wrote a tomb: word %x", b.load())
		}
	}()
	b.Update(func(fixedpoint.Word) (fixedpoint.Word, bool) { return fixedpoint.Tomb, true })
}

// TombIf tombs only a word f accepts, asks again about a word that changed
// under it, and Tomb only a word that is still the one given.
func TestTombIf(t *testing.T) {
	l := layout(t)
	e, w := fullWord(l, 0)
	b := NewBucket(0, e, w)
	if b.TombIf(func(fixedpoint.Word) bool { return false }) || b.load() != w {
		t.Fatal("TombIf tombed against f's answer")
	}
	if b.Tomb(w-1) || b.load() != w {
		t.Fatal("Tomb from a stale word succeeded")
	}
	asked := 0
	if b.TombIf(func(orig fixedpoint.Word) bool {
		if asked++; asked == 1 {
			b.compareAndSwap(orig, orig-1) // a take lands first
			return true
		}
		return orig == w // not full any more: keep it
	}) || asked != 2 || b.load() != w-1 {
		t.Fatalf("TombIf over a take: asked %d times, word %x", asked, b.load())
	}
	if !b.TombIf(func(fixedpoint.Word) bool { return true }) || b.Live() {
		t.Fatal("TombIf did not tomb")
	}
	if b.TombIf(func(fixedpoint.Word) bool { t.Fatal("f called on a tomb"); return true }) || b.Tomb(fixedpoint.Tomb) {
		t.Fatal("a tomb was tombed again")
	}
	if _, live := b.Word(); live {
		t.Fatal("Word reports a tomb live")
	}
}

// Concurrent updates and takes on one word lose nothing: every quantum given
// back by Update and taken by Take is counted once.
func TestUpdateRacingTakes(t *testing.T) {
	l, err := fixedpoint.NewLayout(1e8, 10) // room for every give-back
	if err != nil {
		t.Fatal(err)
	}
	e, w := l.PackNew(0, 0) // empty, stamped at 0: no refill at tick 0
	b := NewBucket(0, e, w)
	base := b.base(l)
	const per = 2000
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := uint64(0)
	for range 4 {
		wg.Go(func() {
			for range per {
				b.Update(func(orig fixedpoint.Word) (fixedpoint.Word, bool) {
					_, at, tokens := l.Advance(orig, base, fixedpoint.Instant{})
					return l.Pack(base, at, tokens+1)
				})
			}
		})
		wg.Go(func() {
			n := uint64(0)
			for range per {
				if s, _ := b.Take(l, fixedpoint.Instant{}, 1); s.Allowed {
					n++
				}
			}
			mu.Lock()
			taken += n
			mu.Unlock()
		})
	}
	wg.Wait()
	_, tokens, _ := peek(b, l, fixedpoint.Instant{})
	if taken+tokens != 4*per {
		t.Errorf("gave %d quanta, took %d, %d left", 4*per, taken, tokens)
	}
}
