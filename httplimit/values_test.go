package httplimit

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sync"
	"testing"
)

// Whatever the cache holds, Handler's values are the texts WriteHeaders
// writes: for results of one, two and three policies, draft and legacy
// fields, with far more distinct texts than slots, on goroutines at once
// (for the race detector).
func TestCachedHeaderValuesAreExact(t *testing.T) {
	vals := newHeaderValues()
	names := []string{"a", "per-ip", "tenant", `q"uote`}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			for range 5000 {
				res := Result{Headers: HeadersDraft | HeadersLegacy | HeadersX}
				for i := range 1 + rnd.IntN(3) {
					p := Policy{Name: names[rnd.IntN(len(names))], Mode: ModeEnforce, Quota: int64(rnd.IntN(3)), Window: 1,
						Remaining: float64(rnd.IntN(3000)) + 0.5, RetryIn: int64(rnd.IntN(4)) - 1, FullIn: int64(rnd.IntN(5)), Unknown: i == 1 && rnd.IntN(4) == 0}
					p.quoted = sfString(p.Name)
					p.policy = policyItem(p.quoted, p.Quota, p.Window)
					res.Policies = append(res.Policies, p)
				}
				cached, fresh := http.Header{}, http.Header{}
				res.writeHeaders(cached, vals)
				res.WriteHeaders(fresh)
				if !reflect.DeepEqual(cached, fresh) {
					t.Errorf("cached values\n%q\nwant\n%q", cached, fresh)
					return
				}
				for k, v := range cached {
					if cap(v) != 1 {
						t.Errorf("%s: value of capacity %d, want 1: appending would write into a shared array", k, cap(v))
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// A value written twice is the same slice, so the second costs nothing;
// Header.Add on it leaves the first response's field alone.
func TestCachedHeaderValuesAreShared(t *testing.T) {
	vals := newHeaderValues()
	p := Policy{Name: "per-ip", Mode: ModeEnforce, Quota: 20, Window: 2, Remaining: 19, quoted: `"per-ip"`}
	p.policy = policyItem(p.quoted, p.Quota, p.Window) // as Check precomputes them
	res := Result{Policies: []Policy{p}}
	first, second := http.Header{}, http.Header{}
	res.writeHeaders(first, vals)
	res.writeHeaders(second, vals)
	for _, k := range []string{hdrPolicy, hdrState} {
		if &first[k][0] != &second[k][0] {
			t.Errorf("%s: two values for one text", k)
		}
	}
	second.Add("RateLimit", "x")
	if got := fmt.Sprint(first["Ratelimit"]); got != `["per-ip";r=19;t=0]` {
		t.Errorf("after Add to another response: %s", got)
	}
	if n := testing.AllocsPerRun(100, func() { res.writeHeaders(second, vals) }); n != 0 {
		t.Errorf("writing cached values: %v allocations, want 0", n)
	}
}
