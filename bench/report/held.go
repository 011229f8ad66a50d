package main

import (
	"fmt"
	"strings"
)

// heldHeading is the heading of httplimit's BenchmarkHandlerHeld and
// BenchmarkDelayWaiting.
const heldHeading = "Delay mode and in-flight limits"

// heldRules are BenchmarkHandlerHeld's cases, in document order: the
// rule, whether another request of the key is held open, and what the
// case is.
var heldRules = []struct{ rule, held, what string }{
	{"plain", "", "a token bucket alone"},
	{"in_flight", "", "an in-flight limit, the key's only request"},
	{"in_flight", "1", "an in-flight limit, another request of the key in flight"},
	{"delay", "", "a token bucket in delay mode, no wait"},
	{"delay_and_in_flight", "", "both in one rule in delay mode, the key's only request"},
	{"delay_and_in_flight", "1", "both in one rule in delay mode, another request of the key in flight"},
}

// heldSection renders the newest results/*-held.txt (bench/held.sh), or
// "" if there is none: each case's median time, bytes and allocations per
// check through Handler against the plain token bucket's of the same run;
// what delay mode holds per waiting request; and the benchstat table.
func heldSection(dir string) (string, error) {
	file, r, err := newest(dir, "-held.txt")
	if file == "" || err != nil {
		return "", err
	}
	table, err := benchstat(file)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	section(&b, 2, heldHeading, file)
	base, ok := r.medianOf("sec/op", "bench", "HandlerHeld", "rule", "plain", "held", "")
	if ok {
		b.WriteString("A check through `Handler`, of an admitted request of an existing key; medians.\n\n")
		b.WriteString("| rule | case | time per check | ÷ token bucket | B per check | allocations per check |\n|---|---|---|---|---|---|\n")
		for _, c := range heldRules {
			kv := []string{"bench", "HandlerHeld", "rule", c.rule, "held", c.held}
			v, ok := r.medianOf("sec/op", kv...)
			if !ok {
				continue
			}
			bytes, _ := r.medianOf("B/op", kv...)
			allocs, _ := r.medianOf("allocs/op", kv...)
			name := c.rule
			if c.held != "" {
				name += ", held=" + c.held
			}
			fmt.Fprintf(&b, "| %s | %s | %.1f ns | %.2f× | %.0f | %.0f |\n", name, c.what, v*1e9, v/base, bytes, allocs)
		}
		b.WriteString("\n")
	}
	kv := []string{"bench", "DelayWaiting"}
	if ss := r.find(kv...); len(ss) == 1 {
		runs := len(ss[0].values["B/waiter"])
		fmt.Fprintf(&b, "What delay mode holds per waiting request, with 10,000 waiting at once, over the same requests held up without it; medians of %d runs.\n\n", runs)
		b.WriteString("| per waiting request | median | range |\n|---|---|---|\n")
		for _, u := range []struct{ unit, what, format string }{
			{"B/waiter", "bytes (heap and stack)", "%.0f"},
			{"heap-B/waiter", "heap bytes", "%.0f"},
			{"stack-B/waiter", "stack bytes", "%.0f"},
			{"goroutines/waiter", "goroutines", "%.2f"},
		} {
			vs := ss[0].values[u.unit]
			if len(vs) == 0 {
				continue
			}
			lo, hi := vs[0], vs[0]
			for _, v := range vs {
				lo, hi = min(lo, v), max(hi, v)
			}
			f := u.format
			fmt.Fprintf(&b, "| %s | "+f+" | "+f+" – "+f+" |\n", u.what, median(vs), lo, hi)
		}
		b.WriteString("\n")
	}
	codeBlock(&b, table)
	return b.String(), nil
}
