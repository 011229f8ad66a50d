package bench

import (
	"strconv"
	"strings"
	"testing"
)

// TestAdapters checks that every registered adapter honours the limiter
// contract on the cases where all of them agree: a fresh key gets exactly
// burst requests when nothing refills, keys are isolated, and a limit that
// never binds admits everything.
func TestAdapters(t *testing.T) {
	if len(impls) == 0 {
		t.Fatal("no implementations registered")
	}
	seen := make(map[string]bool)
	for _, im := range impls {
		if seen[im.name] {
			t.Errorf("impl name %q registered twice", im.name)
		}
		seen[im.name] = true
		if im.name == "" || im.name != strings.ToLower(im.name) || strings.ContainsAny(im.name, " -/") {
			t.Errorf("impl name %q: want lower case without spaces, '-' or '/'", im.name)
		}
	}

	for _, im := range impls {
		t.Run("impl="+im.name, func(t *testing.T) {
			if !im.blocking {
				checkBurst(t, im)
			}
			checkNeverBinds(t, im)
		})
	}
}

// checkBurst: with a refill of one token per 1000s, a fresh key admits its
// burst of 3 and refuses the 4th; a keyed limiter still admits another key.
func checkBurst(t *testing.T, im impl) {
	l, closeFn := im.new(limit{rate: 0.001, burst: 3})
	if closeFn != nil {
		defer closeFn()
	}
	for i := 1; i <= 3; i++ {
		if !l.allow("a") {
			t.Errorf("rate 0.001 burst 3: allow(\"a\") #%d = false, want true", i)
		}
	}
	if l.allow("a") {
		t.Errorf("rate 0.001 burst 3: allow(\"a\") #4 = true, want false")
	}
	if im.keyed && !l.allow("b") {
		t.Errorf("rate 0.001 burst 3: allow(\"b\") after draining \"a\" = false, want true (keys must be isolated)")
	}
}

// checkNeverBinds: with the benchmarks' never-binding limit, 10000
// calls spread over 100 keys are all admitted.
func checkNeverBinds(t *testing.T, im impl) {
	l, closeFn := im.new(limitFor(im, "allow"))
	if closeFn != nil {
		defer closeFn()
	}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	refused := 0
	for i := 0; i < 10000; i++ {
		if !l.allow(keys[i%len(keys)]) {
			refused++
		}
	}
	if refused != 0 {
		t.Errorf("never-binding limit: %d of 10000 calls refused, want 0", refused)
	}
}
